{{- define "svc.fullname" -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- define "svc.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}
{{- define "svc.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}
{{- define "svc.serviceAccountName" -}}{{ default (include "svc.fullname" .) .Values.serviceAccount.name }}{{- end -}}
{{- define "svc.redisUrl" -}}
{{- if .Values.redis.bundled.enabled -}}redis://{{ include "svc.fullname" . }}-redis:6379{{- else -}}{{ .Values.redis.url }}{{- end -}}
{{- end -}}
{{/* The pod template every role shares; .role picks SVC_ROLES. */}}
{{- define "svc.pod" -}}
metadata:
  labels:
    {{- include "svc.selector" . | nindent 4 }}
  annotations:
    checksum/config: {{ include (print .root.Template.BasePath "/configmap.yaml") .root | sha256sum }}
spec:
  serviceAccountName: {{ include "svc.serviceAccountName" .root }}
  terminationGracePeriodSeconds: {{ .root.Values.terminationGracePeriodSeconds }}
  securityContext:
    {{- toYaml .root.Values.podSecurityContext | nindent 4 }}
  containers:
    - name: {{ .role }}
      image: "{{ .root.Values.image.repository }}:{{ .root.Values.image.tag }}"
      imagePullPolicy: {{ .root.Values.image.pullPolicy }}
      securityContext:
        {{- toYaml .root.Values.securityContext | nindent 8 }}
      ports:
        - { name: http, containerPort: 8080, protocol: TCP }
      env:
        - { name: SVC_ROLES, value: {{ .role | quote }} }
        - { name: HOST, value: "0.0.0.0" }
        - { name: PORT, value: "8080" }
        - { name: DATA_DIR, value: /data }
        - { name: SVC_CONFIG_FILE, value: /etc/svc/settings/config.yaml }
        {{- if and .root.Values.redis.existingSecret (eq .root.Values.redis.mode "single") }}
        - name: REDIS_URL
          valueFrom: { secretKeyRef: { name: {{ .root.Values.redis.existingSecret }}, key: REDIS_URL } }
        {{- end }}
        {{- with .root.Values.redis.passwordSecret }}
        - name: REDIS_PASSWORD
          valueFrom: { secretKeyRef: { name: {{ . }}, key: REDIS_PASSWORD } }
        - name: REDIS_USERNAME
          valueFrom: { secretKeyRef: { name: {{ . }}, key: REDIS_USERNAME, optional: true } }
        - name: REDIS_SENTINEL_PASSWORD
          valueFrom: { secretKeyRef: { name: {{ . }}, key: REDIS_SENTINEL_PASSWORD, optional: true } }
        {{- end }}
        {{- if eq .root.Values.auth.mode "token" }}
        - { name: AUTH_TOKENS_FILE, value: /etc/svc/tokens/tokens.yaml }
        {{- end }}
        {{- if .root.Values.vault.keySecret }}
        - { name: SVC_VAULT_KEY_FILE, value: /etc/svc/vault/keys }
        {{- end }}
      envFrom:
        - configMapRef: { name: {{ include "svc.fullname" .root }} }
        {{- if .root.Values.extraEnvSecret }}
        - secretRef: { name: {{ .root.Values.extraEnvSecret }} }
        {{- end }}
      livenessProbe:
        httpGet: { path: /healthz, port: http }
        periodSeconds: 10
        failureThreshold: 3
      readinessProbe:
        httpGet: { path: /readyz, port: http }
        periodSeconds: 5
        failureThreshold: 2
      resources:
        {{- toYaml .resources | nindent 8 }}
      volumeMounts:
        - { name: data, mountPath: /data }
        - { name: tmp, mountPath: /tmp }
        - { name: settings, mountPath: /etc/svc/settings, readOnly: true }
        {{- if eq .root.Values.auth.mode "token" }}
        - { name: tokens, mountPath: /etc/svc/tokens, readOnly: true }
        {{- end }}
        {{- if .root.Values.vault.keySecret }}
        - { name: vault-keys, mountPath: /etc/svc/vault/keys, subPath: {{ .root.Values.vault.keySecretKey | quote }}, readOnly: true }
        {{- end }}
  volumes:
    {{- if ne .role "runtime" }}
    - { name: data, emptyDir: {} }
    {{- end }}
    - { name: tmp, emptyDir: {} }
    - name: settings
      configMap: { name: {{ include "svc.fullname" .root }}-settings }
    {{- if eq .root.Values.auth.mode "token" }}
    - name: tokens
      secret: { secretName: {{ required "auth.tokensSecret is required with auth.mode=token" .root.Values.auth.tokensSecret }} }
    {{- end }}
    {{- if .root.Values.vault.keySecret }}
    # NOTE: 288 = 0440: owner and the pod's fsGroup read; others nothing (the service refuses a key file others can read).
    - name: vault-keys
      secret: { secretName: {{ .root.Values.vault.keySecret }}, defaultMode: 288 }
    {{- end }}
{{- end -}}

import client from 'prom-client';

/** Metrics is the process's prom-client registry and the instruments every role records into. */
export class Metrics {
  readonly registry = new client.Registry();
  readonly httpRequests = new client.Counter({
    name: 'svc_http_requests_total', help: 'HTTP requests by method, route and status.',
    labelNames: ['method', 'route', 'status'], registers: [this.registry],
  });
  readonly httpDuration = new client.Histogram({
    name: 'svc_http_request_duration_seconds', help: 'HTTP request latency by method, route and status.',
    labelNames: ['method', 'route', 'status'], registers: [this.registry],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
  });
  readonly reconciles = new client.Counter({
    name: 'svc_reconciles_total', help: 'Reconciles by kind and outcome (ready, degraded, requeue, error).',
    labelNames: ['kind', 'outcome'], registers: [this.registry],
  });
  readonly reconcileDuration = new client.Histogram({
    name: 'svc_reconcile_duration_seconds', help: 'Reconcile latency by kind.',
    labelNames: ['kind'], registers: [this.registry],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
  });
  readonly reconcileOverlaps = new client.Counter({
    name: 'svc_reconcile_overlaps_total', help: 'Reconciles that finished without their key lease, so another worker may have overlapped (should stay 0).',
    labelNames: ['kind'], registers: [this.registry],
  });
  readonly reconcileDeferrals = new client.Counter({
    name: 'svc_reconcile_deferrals_total', help: 'Reconciles deferred because another worker held the key.',
    labelNames: ['kind'], registers: [this.registry],
  });
  readonly toolCalls = new client.Counter({
    name: 'svc_tool_calls_total', help: 'Tool invocations by source kind and outcome (completed or the error code).',
    labelNames: ['source_kind', 'outcome'], registers: [this.registry],
  });
  readonly queueDepth = new client.Gauge({
    name: 'svc_reconcile_queue_depth', help: 'Reconciles waiting, delayed or active, by kind.',
    labelNames: ['kind'], registers: [this.registry],
  });
  // Notifications (runtime/notifications/): deliveries by outcome, and event → delivered latency.
  readonly notificationDeliveries = new client.Counter({
    name: 'svc_notification_deliveries_total', help: 'Notification delivery attempts by outcome (delivered, retry, failed, skipped).',
    labelNames: ['outcome'], registers: [this.registry],
  });
  readonly notificationLatency = new client.Histogram({
    name: 'svc_notification_delivery_latency_seconds', help: 'Time from a bus event to its delivery to a bridge (retries included).',
    registers: [this.registry], buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800],
  });
  // Support bundles (runtime/support/) and the shared log stream they read (runtime/process/log-sink.ts).
  readonly supportBundles = new client.Counter({
    name: 'svc_support_bundles_total', help: 'Support bundle builds by outcome (completed, failed).',
    labelNames: ['outcome'], registers: [this.registry],
  });
  readonly supportBundleDuration = new client.Histogram({
    name: 'svc_support_bundle_build_seconds', help: 'Time to build a support bundle.',
    registers: [this.registry], buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
  });
  readonly logLinesDropped = new client.Counter({
    name: 'svc_log_lines_dropped_total', help: 'Warning and error log lines that did not reach the shared log stream (buffer full or Redis down).',
    registers: [this.registry],
  });

  constructor() {
    client.collectDefaultMetrics({ register: this.registry });
  }
}

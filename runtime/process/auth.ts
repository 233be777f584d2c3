import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { AuthenticationV1Api } from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';

/** Role is what a caller may do: `reader` (GET only), `operator` (plus writes), `admin` (plus vault and support). */
export type Role = 'reader' | 'operator' | 'admin';
export const ROLES: readonly Role[] = ['reader', 'operator', 'admin'];

/** Principal is an authenticated caller. */
export interface Principal {
  name: string;
  /** Undefined for an authenticated caller that was granted no role (403 everywhere). */
  role?: Role;
}

/** Authenticator turns a bearer token into a principal, or undefined when the token is not valid. */
export interface Authenticator {
  authenticate(token: string): Promise<Principal | undefined>;
}

export const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/**
 * TokenFileAuthenticator checks bearer tokens against a file (e.g. a mounted Secret) that holds only their
 * SHA-256 hashes: `tokens: [{name, role, sha256}]` in YAML or JSON. The file never holds a usable token.
 */
export class TokenFileAuthenticator implements Authenticator {
  private readonly byHash = new Map<string, Principal>();

  constructor(file: string) {
    const doc = parseYaml(readFileSync(file, 'utf8')) as { tokens?: { name?: string; role?: string; sha256?: string }[] };
    for (const [i, t] of (doc?.tokens ?? []).entries()) {
      if (!t?.name || !ROLES.includes(t.role as Role) || !/^[0-9a-f]{64}$/.test(t.sha256 ?? '')) {
        throw new Error(`${file}: tokens[${i}] needs name, role (${ROLES.join('|')}) and sha256 (64 hex)`);
      }
      this.byHash.set(t.sha256!, { name: t.name, role: t.role as Role });
    }
  }

  async authenticate(token: string): Promise<Principal | undefined> {
    return this.byHash.get(sha256(token));
  }
}

/** KubernetesAuthenticatorOptions configures TokenReview-based authentication. */
export interface KubernetesAuthenticatorOptions {
  /** Group → role; a caller gets the highest role of its groups. */
  groupRoles: Map<string, Role>;
  /** API server URL; empty = in-cluster configuration (the service account). */
  apiUrl?: string;
  cacheMs?: number;
}

/**
 * KubernetesAuthenticator checks bearer tokens with the TokenReview API (in-cluster config) and maps the
 * user's groups to a role. Results are cached briefly, keyed by the token's hash, never the token.
 */
export class KubernetesAuthenticator implements Authenticator {
  private api?: AuthenticationV1Api;
  private readonly cache = new Map<string, { at: number; principal?: Principal }>();

  constructor(private readonly o: KubernetesAuthenticatorOptions) {}

  /** client loads @kubernetes/client-node on first use: it is large, and only this mode needs it. */
  private async client(): Promise<AuthenticationV1Api> {
    if (this.api) return this.api;
    const { AuthenticationV1Api, KubeConfig } = await import('@kubernetes/client-node');
    const o = this.o;
    const kc = new KubeConfig();
    if (o.apiUrl) {
      kc.loadFromOptions({
        clusters: [{ name: 'api', server: o.apiUrl, skipTLSVerify: true }], users: [{ name: 'svc' }],
        contexts: [{ name: 'svc', cluster: 'api', user: 'svc' }], currentContext: 'svc',
      });
    } else {
      kc.loadFromCluster();
    }
    this.api = kc.makeApiClient(AuthenticationV1Api);
    return this.api;
  }

  async authenticate(token: string): Promise<Principal | undefined> {
    const key = sha256(token);
    const hit = this.cache.get(key);
    if (hit && Date.now() - hit.at < (this.o.cacheMs ?? 30_000)) return hit.principal;
    const review = await (await this.client()).createTokenReview({ body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } } });
    let principal: Principal | undefined;
    if (review.status?.authenticated) {
      const groups = review.status.user?.groups ?? [];
      const roles = groups.map((g) => this.o.groupRoles.get(g)).filter((r): r is Role => Boolean(r));
      const best = ROLES.filter((r) => roles.includes(r)).at(-1);
      principal = { name: review.status.user?.username ?? 'unknown', role: best };
    }
    this.cache.set(key, { at: Date.now(), principal });
    if (this.cache.size > 10_000) this.cache.delete(this.cache.keys().next().value!);
    return principal;
  }
}

/** parseGroupRoles reads `group=role,group=role`. */
export function parseGroupRoles(s: string): Map<string, Role> {
  const out = new Map<string, Role>();
  for (const pair of s.split(',').map((p) => p.trim()).filter(Boolean)) {
    const [group, role] = pair.split('=').map((x) => x.trim());
    if (!group || !ROLES.includes(role as Role)) throw new Error(`AUTH_K8S_GROUP_ROLES entry "${pair}" must be group=${ROLES.join('|')}`);
    out.set(group, role as Role);
  }
  return out;
}

import { ForbiddenError, ValidationError } from '../../store/errors.ts';
import { SecretRefs, secretRefsOf } from './child-env.ts';
import { EgressPolicy } from './egress.ts';
import { ExecPolicy, executablesOf } from './exec-policy.ts';
import { loaderVariablesOf } from './loader-env.ts';
import { PathConfinement } from './paths.ts';
import { SecretDestinations } from './secret-destinations.ts';
import type { SecretRef, SecurityConfig } from './types.ts';
import { WorkspaceRoots } from './workspace-roots.ts';

/**
 * SecurityPolicy is the one place the process's security rules live: who may write what executes
 * (admin in token and kubernetes modes), which executables may run (EXEC_ALLOWLIST), which variables secret
 * refs may name (SECRET_ENV_ALLOWLIST), where workspaces may be (WORKSPACE_ROOTS), and where outbound requests
 * may go (EGRESS_ALLOWLIST: egress.ts).
 */
export class SecurityPolicy {
  readonly exec: ExecPolicy;
  readonly secrets: SecretRefs;
  readonly workspaceRoots: WorkspaceRoots;
  /** paths confines every path a record or a name makes the service open (paths.ts), checked by admit too. */
  readonly paths: PathConfinement;
  /** egress is the destination rule of every outbound client (egress.ts). */
  readonly egress: EgressPolicy;
  /** destinations binds vault secrets to the hosts their allowed_hosts name (secret-destinations.ts). */
  readonly destinations: SecretDestinations;

  constructor(readonly config: SecurityConfig) {
    this.egress = new EgressPolicy(config);
    this.destinations = new SecretDestinations(config.authMode);
    this.exec = new ExecPolicy(config.execAllowlist);
    this.secrets = new SecretRefs(config.secretEnvAllowlist);
    this.workspaceRoots = new WorkspaceRoots(config.workspaceRoots, config.dataDir);
    this.paths = new PathConfinement(config);
  }

  /** requiresAdmin: with authentication on, only an admin may write what makes the service run a program. */
  get requiresAdmin(): boolean {
    return this.config.authMode !== 'none';
  }

  /**
   * admit checks a decoded spec before it is written (or dry-run): 403 when a non-admin writes an executable
   * field or a child-process variable that can make a program load other code (loader-env.ts), 422 naming each
   * executable outside EXEC_ALLOWLIST and each secret ref outside SECRET_ENV_ALLOWLIST. `role` is the caller's
   * (undefined without authentication). Field paths are reported under `spec.`.
   */
  admit(kind: string, spec: unknown, role: string | undefined): void {
    this.paths.admit(spec);
    const exes = executablesOf(kind, spec);
    if (this.requiresAdmin && role !== 'admin') {
      // NOTE: a loader variable runs code of the writer's choosing through an allowed program (LD_PRELOAD under
      // any binary, ESBUILD_BINARY_PATH under the built-in agent's loader), so it is guarded as a command is.
      const evidence: Record<string, string> = {};
      for (const e of exes) evidence[`spec.${e.path}`] = 'runs a program on the service: needs the admin role';
      for (const v of loaderVariablesOf(spec)) evidence[`spec.${v.path}`] = `${v.reason}: needs the admin role`;
      const fields = Object.keys(evidence);
      if (fields.length) {
        throw new ForbiddenError(`writing ${fields.join(', ')} needs the admin role`, exes.length ? 'exec_requires_admin' : 'env_requires_admin', { ...evidence, required_role: 'admin' });
      }
    }
    const problems: Record<string, string> = {};
    for (const e of exes) {
      const c = this.exec.check(e);
      if (!c.ok) problems[`spec.${e.path}`] = c.reason;
    }
    for (const r of [...secretRefsOf(spec), ...bridgeSecretRefsOf(kind, spec)]) {
      const why = this.secrets.refusal(r.ref);
      if (why) problems[`spec.${r.path}`] = why;
    }
    if (Object.keys(problems).length) {
      const code = Object.values(problems).some((m) => m.includes('SECRET_ENV')) && !exes.some((e) => problems[`spec.${e.path}`]) ? 'secret_ref_not_allowed' : 'command_not_allowed';
      throw new ValidationError(`invalid ${kind} spec: ${Object.entries(problems).map(([k, v]) => `${k}: ${v}`).join('; ')}`, code, problems);
    }
  }

  /**
   * admitDestinations checks, before a write, where a spec would send vault secrets: 422 naming each secret header
   * of a webhook bridge whose secret's allowed_hosts does not name the bridge's host (secret-destinations.ts).
   */
  async admitDestinations(kind: string, spec: unknown): Promise<void> {
    const url = kind === 'bridge.instance' ? (spec as { provider_config?: { url?: unknown } } | undefined)?.provider_config?.url : undefined;
    if (typeof url !== 'string') return;
    const headers = bridgeSecretRefsOf(kind, spec).filter((r) => r.path.startsWith('provider_config.secret_headers.'));
    const refused = await this.destinations.refusals(headers, url);
    const problems = Object.fromEntries(Object.entries(refused).map(([k, v]) => [`spec.${k}`, v]));
    if (Object.keys(problems).length) {
      throw new ValidationError(`invalid ${kind} spec: ${Object.entries(problems).map(([k, v]) => `${k}: ${v}`).join('; ')}`, 'secret_destination_not_allowed', problems);
    }
  }

  /** commandRefusal re-checks a stored spec's executables (reconcile and spawn time): the first refusal, if any. */
  commandRefusal(kind: string, spec: unknown): string | undefined {
    for (const e of executablesOf(kind, spec)) {
      const c = this.exec.check(e);
      if (!c.ok) return `${e.path}: ${c.reason}`;
    }
    return undefined;
  }
}

/**
 * bridgeSecretRefsOf lists the secret refs of a webhook bridge (`provider_config.secret_headers.*` and
 * `provider_config.secret_ref`) by field path. NOTE: they resolve like `secret_env` (SecretRefs), so an `env:` ref
 * outside SECRET_ENV_ALLOWLIST is refused when written, not first found at delivery.
 */
export function bridgeSecretRefsOf(kind: string, spec: unknown): SecretRef[] {
  const pc = kind === 'bridge.instance' ? (spec as { provider_config?: { secret_headers?: unknown; secret_ref?: unknown } } | undefined)?.provider_config : undefined;
  if (!pc || typeof pc !== 'object') return [];
  const out: SecretRef[] = [];
  if (pc.secret_headers && typeof pc.secret_headers === 'object') {
    for (const [name, ref] of Object.entries(pc.secret_headers)) if (typeof ref === 'string') out.push({ path: `provider_config.secret_headers.${name}`, ref });
  }
  if (typeof pc.secret_ref === 'string' && pc.secret_ref) out.push({ path: 'provider_config.secret_ref', ref: pc.secret_ref });
  return out;
}

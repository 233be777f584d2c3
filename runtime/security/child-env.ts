import { minimatch } from 'minimatch';
import { fieldsNamed } from './spec-fields.ts';
import type { SecretRef } from './types.ts';

/** INHERITED names the service's variables a child process starts with; everything else it must be given. */
const INHERITED = ['PATH', 'HOME', 'LANG', 'TERM', 'TMPDIR', 'TZ'];

/**
 * childEnv is the whole environment of a process the service starts (agent, MCP server, hook): the inherited
 * basics (PATH, HOME, LANG, LC_*, TERM, TMPDIR, TZ), then what its record declares (`env`, resolved
 * `secret_env`), then the SVC_* identity the service hands it. NOTE: never the service's own configuration
 * (REDIS_URL, AUTH_*, tokens): a child with REDIS_URL could read and write the whole store.
 */
export function childEnv(declared: Record<string, string> = {}, identity: Record<string, string> = {}, from: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(from)) {
    if (v !== undefined && (INHERITED.includes(k) || k.startsWith('LC_'))) env[k] = v;
  }
  return { ...env, ...declared, ...identity };
}

/** secretRefsOf lists every `secret_env` entry of a spec, at any depth (records and the declarations they embed). */
export function secretRefsOf(spec: unknown): SecretRef[] {
  return fieldsNamed(spec, 'secret_env').flatMap(({ path, value }) =>
    value && typeof value === 'object' && !Array.isArray(value)
      ? Object.entries(value).filter(([, ref]) => typeof ref === 'string').map(([name, ref]) => ({ path: `${path}.${name}`, ref: ref as string }))
      : []);
}

/** ResolvedSecrets is the outcome of resolving a `secret_env` map: the values, and the names that did not resolve. */
export interface ResolvedSecrets {
  env: Record<string, string>;
  /** Variable names whose ref is not set, or names a vault (none here). */
  missing: string[];
  /** Variable names whose `env:` ref is outside SECRET_ENV_ALLOWLIST. */
  refused: string[];
  /** The resolved values, to redact wherever they could surface (events, logs, tool results). */
  values: string[];
}

/** MIN_SECRET_LENGTH: shorter values are not masked as literals (masking "1" or "on" would garble every text). */
const MIN_SECRET_LENGTH = 4;

/**
 * SecretRefs resolves `secret_env` refs under SECRET_ENV_ALLOWLIST: `env:NAME` only for names matching one of
 * its patterns (default `SVC_SECRET_*`), so a record's author cannot hand the service's own configuration
 * (REDIS_URL, token files) to a process of their choosing; `vault:` refs wait for the vault.
 */
export class SecretRefs {
  constructor(private readonly allowlist: readonly string[], private readonly from: NodeJS.ProcessEnv = process.env) {}

  /** refusal says why a ref may not be used (undefined when it may). */
  refusal(ref: string): string | undefined {
    if (ref.startsWith('vault:')) return undefined;
    const name = ref.startsWith('env:') ? ref.slice(4) : '';
    if (!name) return 'must be env:NAME or vault:<namespace>/<path>';
    return this.allowlist.some((p) => minimatch(name, p)) ? undefined : `env:${name} is outside SECRET_ENV_ALLOWLIST (${this.allowlist.join(', ') || 'empty'})`;
  }

  /**
   * values are the values of every variable an `env:` ref may resolve (names under SECRET_ENV_ALLOWLIST): what a
   * support bundle masks as literals, whether or not a record uses them today.
   */
  values(): string[] {
    return Object.entries(this.from)
      .filter(([name, v]) => v !== undefined && v.length >= MIN_SECRET_LENGTH && this.allowlist.some((p) => minimatch(name, p)))
      .map(([, v]) => v!);
  }

  /** resolve reads each ref; a refused or unset one is reported by its variable name, never by its value. */
  resolve(refs: Record<string, string> = {}): ResolvedSecrets {
    const out: ResolvedSecrets = { env: {}, missing: [], refused: [], values: [] };
    for (const [name, ref] of Object.entries(refs)) {
      if (this.refusal(ref)) { out.refused.push(name); continue; }
      const value = ref.startsWith('env:') ? this.from[ref.slice(4)] : undefined;
      if (value === undefined) { out.missing.push(name); continue; }
      out.env[name] = value;
      if (value.length >= MIN_SECRET_LENGTH) out.values.push(value);
    }
    return out;
  }
}

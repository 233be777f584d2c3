import type { ResourceService } from '../resources/resource-service.ts';
import type { VaultService } from '../vault/vault-service.ts';
import type { WorkspaceService } from '../workspaces/workspace-service.ts';
import { ConflictError, ServiceError, ValidationError } from '../../store/errors.ts';
import type { MarketplaceStore } from '../../store/marketplace-store.ts';
import { mcpInstallKey, type Marketplace } from './marketplace.ts';
import type { McpPackage } from './types.ts';

/** MCP_INSTALL_FIELDS are the fields of an MCP install body (unknown ones are the route's field validation). */
export const MCP_INSTALL_FIELDS = ['name', 'scope', 'workspace_id', 'env', 'package'];
/** SERVER_NAME is an installed server's name: the record id and the vault path segment `vault:mcp/<name>/…`. */
const SERVER_NAME = /^[a-z0-9][a-z0-9_.-]{0,62}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** McpInstallResult is what an MCP install answers: the record written and the vault refs its secrets went to. */
export interface McpInstallResult {
  server: { kind: string; id: string; scope: { kind: string; id?: string }; source: { kind: string; id: string }; version: number; spec: unknown };
  secrets: { name: string; ref: string; stored: boolean }[];
  package: string;
}

/** defaultName is an entry's server name suggestion: the identity's last part, in the vault path grammar. */
export const defaultName = (identity: string) => identity.split('/').pop()!.toLowerCase().replace(/[^a-z0-9_.-]+/g, '-').replace(/^[^a-z0-9]+/, '').slice(0, 63) || 'server';

/**
 * McpInstaller turns an MCP marketplace entry into desired state: an `mcp_server` record written
 * through the resource service (so its validation, the exec policy and the admin rule apply), with source
 * `{kind: marketplace, id: <entry>}`. A secret variable's value given in the body is stored in the vault at
 * `vault:mcp/<name>/<VAR>` and the record carries only that ref; one not given (optional or required) is still
 * referenced there, so the controller reports `SecretNotFound` until an operator writes it. A name a record of the
 * scope holds (its id or its spec.name) is 409 `mcp_server_name_taken` naming that record.
 */
export class McpInstaller {
  constructor(private readonly o: { marketplace: Marketplace; resources: ResourceService; vault: VaultService; workspaces: WorkspaceService; store: MarketplaceStore }) {}

  async install(entryId: string, body: Record<string, unknown>, role: string | undefined): Promise<McpInstallResult> {
    const row = await this.o.marketplace.row('mcp', entryId);
    const problems: Record<string, string> = {};
    const name = body.name === undefined ? defaultName(row.identity) : typeof body.name === 'string' ? body.name.trim() : '';
    if (!SERVER_NAME.test(name)) problems.name = 'must be 1-63 characters of a-z, 0-9, "_", "." or "-", starting with a letter or digit';
    const scopeKind = body.scope ?? 'global';
    if (scopeKind !== 'global' && scopeKind !== 'workspace') problems.scope = 'must be global or workspace';
    if (scopeKind === 'workspace' && (typeof body.workspace_id !== 'string' || !body.workspace_id)) problems.workspace_id = 'is required with scope workspace';
    if (scopeKind === 'global' && body.workspace_id !== undefined) problems.workspace_id = 'goes with scope workspace only';
    const env = body.env ?? {};
    if (typeof env !== 'object' || env === null || Array.isArray(env) || Object.values(env).some((v) => typeof v !== 'string')) problems.env = 'must map variable names to strings (values, vault: or env: refs)';
    const packages = row.packages ?? [];
    const wanted = body.package;
    if (wanted !== undefined && (typeof wanted !== 'string' || !packages.some((p) => p.type === wanted))) {
      problems.package = `must be one of this entry's packages: ${packages.map((p) => p.type).join(', ') || '(none)'}`;
    }
    if (!packages.length) problems.package = 'this entry has no package or remote this service can run (npm, pypi, oci, streamable-http, sse)';
    if (Object.keys(problems).length) throw invalid(problems);
    const pkg = packages.find((p) => p.type === (wanted ?? packages[0].type))!;
    const scope = scopeKind === 'workspace' ? { kind: 'workspace', id: (await this.o.workspaces.get(body.workspace_id as string)).id } : { kind: 'global' };
    const { spec, secrets } = this.plan(pkg, name, env as Record<string, string>);
    // NOTE: the tool catalog knows servers by spec.name: a second record of that name in the scope would silently
    // take over (or lose) the first one's tools. The record id is the name too, so a record of that id holds it as well.
    const holder = (await this.o.resources.list({ kind: 'mcp_server', scope }))
      .find((r) => r.id === name || (r.spec as { name?: unknown }).name === name);
    if (holder) throw nameTaken(name, holder);
    const request = { scope, spec, expected_version: 0, source: { kind: 'marketplace', id: entryId } };
    // NOTE: a dry run first: every refusal (exec policy, admin, an existing record) answers before a secret is written.
    await this.o.resources.put('mcp_server', name, request, { dryRun: true, role }).catch((err) => { throw inBodyTerms(takenIfExists(err, name)); });
    // NOTE: the record (expected_version 0) before its secrets: of concurrent installs of one name only the winner
    // writes them, so a loser's 409 cannot replace the winner's value. The record is SecretNotFound for the moment
    // between; the vault write re-reconciles it. A secret that cannot be written takes the record back out.
    const res = await this.o.resources.put('mcp_server', name, request, { role }).catch((err) => { throw takenIfExists(err, name); });
    try {
      for (const s of secrets) {
        if (s.value !== undefined) await this.o.vault.put({ ref: s.ref, secret_value: s.value, kind: 'mcp' });
      }
    } catch (err) {
      await this.o.resources.delete('mcp_server', name, { expected_version: res.record.version }, { role }).catch(() => undefined);
      throw err;
    }
    await this.o.store.setMcpInstalled(mcpInstallKey(scope, name), { entry_id: entryId, version: row.version, source: row.source });
    const r = res.record;
    return {
      server: { kind: r.kind, id: r.id, scope: r.scope, source: r.source, version: r.version, spec: r.spec },
      secrets: secrets.map((s) => ({ name: s.name, ref: s.ref, stored: s.value !== undefined })),
      package: pkg.type,
    };
  }

  /** plan builds the record's spec from a package and the body's env, and lists the secrets to store. */
  private plan(pkg: McpPackage, name: string, given: Record<string, string>) {
    const problems: Record<string, string> = {};
    const known = new Map(pkg.env.map((e) => [e.name, e]));
    for (const k of Object.keys(given)) {
      if (!ENV_NAME.test(k)) problems[`env.${k}`] = 'must match ^[A-Za-z_][A-Za-z0-9_]*$';
      else if (!known.has(k)) problems[`env.${k}`] = `is not a variable of this entry (${[...known.keys()].join(', ') || 'it has none'})`;
    }
    if (pkg.type === 'remote') {
      const headers = pkg.headers.filter((h) => h.required).map((h) => h.name);
      if (headers.length) problems.package = `the remote needs headers (${headers.join(', ')}), which mcp_server records cannot carry; choose a package or configure the server by hand`;
      if (Object.keys(problems).length) throw invalid(problems);
      return { spec: { name, transport: pkg.transport, url: pkg.url }, secrets: [] };
    }
    const plain: Record<string, string> = {};
    const secretEnv: Record<string, string> = {};
    const secrets: { name: string; ref: string; value?: string }[] = [];
    for (const e of pkg.env) {
      const v = given[e.name];
      const isRef = v !== undefined && /^(vault|env):/.test(v);
      const vaultRef = `vault:mcp/${name}/${e.name}`;
      if (isRef) { secretEnv[e.name] = v; continue; }
      // NOTE: a secret, or a name that looks like one (the codec refuses those in env), goes to the vault.
      // One not given, optional or not, is referenced all the same, so an operator writes it to the vault later.
      if (e.secret || /(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)/i.test(e.name)) {
        secretEnv[e.name] = vaultRef;
        secrets.push({ name: e.name, ref: vaultRef, ...(v !== undefined && v !== '' ? { value: v } : {}) });
        continue;
      }
      const value = v ?? e.default;
      if (value) plain[e.name] = value;
      else if (e.required) problems[`env.${e.name}`] = `is required${e.prompt ? ` (${e.prompt})` : ''}`;
    }
    if (Object.keys(problems).length) throw invalid(problems);
    const spec = {
      name, transport: 'stdio', command: pkg.command, args: pkg.args,
      ...(Object.keys(plain).length ? { env: plain } : {}), ...(Object.keys(secretEnv).length ? { secret_env: secretEnv } : {}),
    };
    return { spec, secrets };
  }
}

/**
 * inBodyTerms renames a record refusal's fields to the install body's (`spec.secret_env.K` and `spec.env.K` are
 * `env.K`, `spec.name` is `name`, the rest of the spec came from the chosen `package`): the caller never wrote a spec.
 */
function inBodyTerms(err: unknown): unknown {
  if (!(err instanceof ServiceError) || !Object.keys(err.evidence).some((k) => k.startsWith('spec.'))) return err;
  const field = (k: string): string => {
    const env = /^spec\.(?:secret_env|env)\.(.+)$/.exec(k);
    return env ? `env.${env[1]}` : k === 'spec.name' ? 'name' : k.startsWith('spec.') ? 'package' : k;
  };
  const evidence: Record<string, string> = {};
  for (const [k, v] of Object.entries(err.evidence)) {
    const f = field(k);
    // NOTE: a package problem keeps the spec field it is about (`command: "npx" is not in EXEC_ALLOWLIST`).
    const text = f === 'package' ? `${k.slice('spec.'.length)}: ${String(v)}` : String(v);
    evidence[f] = evidence[f] === undefined ? text : `${evidence[f]}; ${text}`;
  }
  const Ctor = err.constructor as new (m: string, c: string, e: Record<string, unknown>) => ServiceError;
  return new Ctor(`invalid MCP install: ${Object.entries(evidence).map(([k, v]) => `${k} ${v}`).join('; ')}`, err.code, evidence);
}

/** nameTaken is the 409 for a server name a record of the scope holds already (its id or its spec.name), naming that record. */
function nameTaken(name: string, holder: { id: string; source?: { kind: string; id: string } }): ConflictError {
  const from = holder.source ? ` (source ${holder.source.kind}${holder.source.id ? `:${holder.source.id}` : ''})` : '';
  return new ConflictError(
    `the server name "${name}" is taken by mcp_server "${holder.id}"${from}; choose another name, or delete that record first`,
    'mcp_server_name_taken', { name, id: holder.id, holder: `mcp_server/${holder.id}`, ...(holder.source ? { holder_source: holder.source } : {}) },
  );
}

/** takenIfExists reads a create's version conflict (a record of that id written meanwhile) as the name being taken. */
function takenIfExists(err: unknown, name: string): unknown {
  if (err instanceof ConflictError && err.code === 'version_conflict' && err.evidence.expected_version === 0) return nameTaken(name, { id: String(err.evidence.id ?? name) });
  return err;
}

function invalid(problems: Record<string, string>): ValidationError {
  return new ValidationError(`invalid MCP install: ${Object.entries(problems).map(([k, v]) => `${k} ${v}`).join('; ')}`, 'invalid_install', problems);
}

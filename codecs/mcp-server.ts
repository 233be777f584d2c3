import * as yup from 'yup';
import { at, check, checkEnv, checkSecretRefs, isObject, Issues, str, strMap, y } from './shared.ts';
import type { Codec } from './types.ts';

const AUTH_FIELDS = ['type', 'issuer_url', 'metadata_url', 'authorization_url', 'token_url', 'revocation_url', 'client_id', 'client_secret_ref'] as const;

/** mcpServerShape is the yup shape of an MCP server declaration, shared with agents and skills. */
export const mcpServerShape = yup.object({
  name: y.string().required('is required'),
  transport: y.oneOf(['', 'stdio', 'http', 'sse']),
  command: y.string(), args: y.stringList(), env: y.stringMap(), secret_env: y.stringMap(), url: y.string(),
  auth: y.object().shape({ ...Object.fromEntries(AUTH_FIELDS.map((f) => [f, y.string()])), scopes: y.stringList() }).default(undefined),
});

/** decodeMcpServer validates and canonicalizes one MCP server declaration at `base`. */
export function decodeMcpServer(v: unknown, base: string, issues: Issues, stdioOnly = false): Record<string, unknown> | undefined {
  if (!check(mcpServerShape, v, issues, base)) return undefined;
  const s = v as Record<string, any>;
  const name = str(s.name);
  if (!name) issues.add(at(base, 'name'), 'is required');
  const transport = str(s.transport);
  const url = str(s.url);
  const command = str(s.command);
  const env = strMap(s.env);
  const secretEnv = strMap(s.secret_env);
  const auth: Record<string, unknown> = isObject(s.auth) ? { ...Object.fromEntries(AUTH_FIELDS.map((f) => [f, str(s.auth[f])])), scopes: Array.isArray(s.auth.scopes) ? s.auth.scopes.map(str) : [] } : {};
  const remote = stdioOnly ? false : transport === 'http' || transport === 'sse' || (!transport && Boolean(url));
  if (!remote) {
    if (!command) issues.add(at(base, 'command'), 'is required for a stdio server');
    if (url) issues.add(at(base, 'url'), 'is not allowed for a stdio server');
    if (Object.values(auth).some((x) => (Array.isArray(x) ? x.length : x))) issues.add(at(base, 'auth'), 'is not allowed for a stdio server');
    checkEnv(env, at(base, 'env'), issues);
    checkSecretRefs(secretEnv, 'mcp', at(base, 'secret_env'), issues);
  } else {
    if (!url) issues.add(at(base, 'url'), `is required for a ${transport || 'http'} server`);
    if (command) issues.add(at(base, 'command'), 'is not allowed for a remote server');
    if (secretEnv) issues.add(at(base, 'secret_env'), 'is not allowed for a remote server');
  }
  const anyAuth = Object.values(auth).some((x) => (Array.isArray(x) ? x.length : x));
  if (anyAuth) {
    if (auth.type !== 'oauth2_pkce') issues.add(at(base, 'auth.type'), 'must be oauth2_pkce');
    if (!auth.client_id) issues.add(at(base, 'auth.client_id'), 'is required');
    if (!auth.metadata_url && !auth.issuer_url && !(auth.authorization_url && auth.token_url)) {
      issues.add(at(base, 'auth'), 'needs metadata_url, issuer_url, or both authorization_url and token_url');
    }
    if (auth.client_secret_ref && !/^vault:mcp\/\S+$/.test(String(auth.client_secret_ref))) issues.add(at(base, 'auth.client_secret_ref'), 'must be in the mcp namespace (vault:mcp/<path>)');
    (auth.scopes as string[]).forEach((sc, i) => { if (!sc) issues.add(at(base, `auth.scopes[${i}]`), 'must not be empty'); });
  }
  return {
    name, transport, ...(command ? { command } : {}), args: Array.isArray(s.args) ? s.args.map(str) : [],
    ...(env ? { env } : {}), ...(secretEnv ? { secret_env: secretEnv } : {}), ...(url ? { url } : {}),
    auth: anyAuth ? auth : {},
  };
}

/** mcpServerCodec validates an `mcp_server` spec. */
export const mcpServerCodec: Codec = {
  kind: 'mcp_server',
  maxBytes: 256 * 1024,
  decode(input, ctx) {
    const issues = new Issues(ctx.unknownFields);
    if (!isObject(input)) return { ok: false, errors: [{ path: 'spec', message: 'must be a JSON object' }] };
    const spec = decodeMcpServer(input, '', issues);
    return issues.ok && spec ? { ok: true, spec } : { ok: false, errors: issues.list };
  },
};


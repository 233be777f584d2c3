import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import type { Endpoint } from './client.ts';
import { UsageError } from './errors.ts';

/** DEFAULT_SERVER is the address of a default `make run` service. */
export const DEFAULT_SERVER = 'http://127.0.0.1:8080';

/**
 * ConfigFile is `~/.config/svcctl/config.yaml` (or `$SVCCTL_CONFIG`): named contexts, kubeconfig-style.
 *   current-context: prod
 *   contexts:
 *     - {name: prod, server: https://svc.example, token: …}   # or token_env: NAME (read from the environment)
 */
interface ConfigFile {
  'current-context'?: string;
  contexts?: { name: string; server?: string; token?: string; token_env?: string }[];
}

/** configPath is where the config file is read from. */
export function configPath(env: NodeJS.ProcessEnv): string {
  return env.SVCCTL_CONFIG || path.join(env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config'), 'svcctl', 'config.yaml');
}

/**
 * resolveEndpoint picks the server and token, first found wins field by field: flags (`--server`, `--token`),
 * the environment (`SVC_URL`, `SVC_TOKEN`), the context named by `--context` (else `current-context`) of the
 * config file, then the default server.
 */
export function resolveEndpoint(flags: { server?: string; token?: string; context?: string }, env: NodeJS.ProcessEnv = process.env): Endpoint {
  const file = configPath(env);
  let ctx: NonNullable<ConfigFile['contexts']>[number] | undefined;
  if (existsSync(file)) {
    let cfg: ConfigFile;
    try {
      cfg = (YAML.parse(readFileSync(file, 'utf8')) ?? {}) as ConfigFile;
    } catch (err) {
      throw new UsageError(`${file}: ${(err as Error).message}`);
    }
    const name = flags.context ?? cfg['current-context'];
    if (name) {
      ctx = (cfg.contexts ?? []).find((c) => c.name === name);
      if (!ctx) throw new UsageError(`${file}: no context named "${name}"`);
    }
  } else if (flags.context) {
    throw new UsageError(`--context ${flags.context}: no config file at ${file}`);
  }
  const server = flags.server ?? env.SVC_URL ?? ctx?.server ?? DEFAULT_SERVER;
  const token = flags.token ?? env.SVC_TOKEN ?? ctx?.token ?? (ctx?.token_env ? env[ctx.token_env] : undefined);
  try {
    new URL(server);
  } catch {
    throw new UsageError(`server "${server}" is not a URL`);
  }
  return { server, token: token || undefined };
}

/** AuthMode is how callers authenticate; the execution and workspace defaults follow from it. */
export type AuthMode = 'none' | 'token' | 'kubernetes';

/**
 * SecurityConfig is the security policy of one process, read from the environment (runtime/process/config.ts):
 * what may be executed, where workspaces may live, which variables secret refs may name, and which browser
 * origins and hosts the API answers.
 */
export interface SecurityConfig {
  authMode: AuthMode;
  /** EXEC_ALLOWLIST: glob patterns of executables; `*` allows any; empty allows none (but the built-in agent). */
  execAllowlist: string[];
  /** WORKSPACE_ROOTS: directories a workspace's root_dir and add_dirs must lie in; undefined = anywhere. */
  workspaceRoots?: string[];
  /** SECRET_ENV_ALLOWLIST: glob patterns of the variable names `env:` secret refs may resolve. */
  secretEnvAllowlist: string[];
  /** ALLOWED_ORIGINS: browser origins (scheme://host[:port]) allowed to call the API, besides its own. */
  allowedOrigins: string[];
  /** ALLOWED_HOSTS: Host header values served with AUTH_MODE=none, besides the loopback names. */
  allowedHosts: string[];
  /**
   * EGRESS_ALLOWLIST: host names, `*.domain` wildcards, addresses and CIDRs outbound requests may reach although
   * they are private, loopback or link-local (runtime/security/egress.ts).
   */
  egressAllowlist?: string[];
  /** DATA_DIR: the service's own state; never a workspace. */
  dataDir: string;
  /** The service's own files no record may make it open (AUTH_TOKENS_FILE, SVC_CONFIG_FILE, SVC_VAULT_KEY_FILE, KUBECONFIG). */
  secretFiles: string[];
}

/** Executable is one field of a record that makes the service run a program. */
export interface Executable {
  /** The field's path in the spec, e.g. `command` or `mcp_servers[0].command`. */
  path: string;
  command: string;
  /** An agent's command is a shell command line; others are one executable (plus `args`). */
  shell: boolean;
}

/** SecretRef is one `secret_env` entry of a record: the variable it sets and the ref it resolves. */
export interface SecretRef {
  path: string;
  ref: string;
}

/** Agent is the operator view of an agent definition. */
export interface Agent {
  category_path: string[];
  command: string;
  deny_tools: string[];
  diagnostics: { error_kind: string; message: string; path: string }[];
  mcp_servers: unknown[];
  model: string;
  name: string;
  permissions: string;
  prompt: string;
  provider: string;
  tools: string[];
  toolsets: string[];
}

/**
 * ProviderStatus is a configured provider's catalog status in the workspace snapshot: where it is configured
 * (`scope`: the global settings file, or only the workspace's), its live source's refresh, and `warnings` naming
 * workspace overrides the catalog does not apply.
 */
export interface ProviderStatus {
  configured: boolean;
  scope: 'global' | 'workspace' | '';
  kind: string;
  base_url: string;
  refresh_state: string;
  last_refresh: string;
  last_success: string;
  last_error: string;
  row_count: number;
  warnings: string[];
}

/** Provider is the spec's Provider object: here, a provider name that agent definitions reference. */
export interface Provider {
  auth_mode: string;
  display_name: string;
  env_policy: string;
  harness: string;
  home_policy: string;
  name: string;
  runtime_provider: string;
  /** The provider's model catalog status: configured in the settings or only named by agents. */
  status?: ProviderStatus;
}

/**
 * AgentEnv is what a definition declares for its process: plain variables, secret refs (resolved at start) and the
 * ACP auth method the runtime authenticates with.
 */
export interface AgentEnv {
  env?: Record<string, string>;
  secret_env?: Record<string, string>;
  auth_method?: string;
}

/** ResolvedAgent is what a session runs: the built-in scripted agent or a definition's command, with its declared env. */
export type ResolvedAgent = ({ name: string; builtin: true } | { name: string; builtin: false; command: string }) & AgentEnv & {
  /** The definition's `provider` (the model catalog files the models the agent reports under it). */
  provider?: string;
  /** The definition's permission mode (`deny-all`, `approve-reads`, `approve-all`; empty: `approve-reads`). */
  permissions?: string;
  /** The definition's `deny_tools` patterns, matched against the agent's own tools too. */
  deny_tools?: string[];
  /** Which client file methods the agent is offered (`client_capabilities.fs`); absent: both. */
  client_fs?: { read: boolean; write: boolean };
};

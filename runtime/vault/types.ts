/** VaultSecretMeta is what the vault tells about a secret: never its value. */
export interface VaultSecretMeta {
  ref: string;
  namespace: string;
  /** What the secret is (`api_key`, `token`, …), as its writer said; omitted when none was given. */
  kind?: string;
  /** The hosts (names, `*.domain`, addresses, CIDRs) an admin said its value may be sent to; omitted when none. */
  allowed_hosts?: string[];
  present: boolean;
  created_at: string;
  updated_at: string;
}

/** VaultResolution is the outcome of resolving one vault ref: its value, or why there is none (never a value). */
export type VaultResolution = { value: string } | { problem: string };

/** VaultRefResolver resolves `vault:` refs for SecretRefs (runtime/security/child-env.ts). */
export interface VaultRefResolver {
  resolveRefs(refs: readonly string[]): Promise<Map<string, VaultResolution>>;
}

/** RotationResult counts what one `POST /api/vault/rotate` did. */
export interface RotationResult {
  /** The key every data key is now sealed by. */
  key_id: string;
  /** Secrets looked at. */
  scanned: number;
  /** Secrets whose data key this run re-sealed. */
  rotated: number;
  /** Secrets already sealed by key_id (by a write, or by an earlier, interrupted run). */
  already_current: number;
  /** Secrets written or deleted while the run read them: the writer's value stands (sealed by key_id if written). */
  changed_during_rotation: number;
  /** Secrets sealed by a key that is not configured: they stay as they are and do not open until it is. */
  unreadable: number;
  /** Refs of the unreadable secrets (the first 100). */
  unreadable_refs: string[];
}

/** VaultKeyStatus is one key id in use or configured, and how many secrets it seals (never key bytes). */
export interface VaultKeyStatus {
  /** The key's id: `sha256-` and 32 hex digits of the SHA-256 of its bytes; in secrets sealed before ids were derived, a key name. */
  id: string;
  /** The name the key is configured under in this process; omitted for a key this process lacks. */
  name?: string;
  /** Whether the key is configured in this process (SVC_VAULT_KEYS / SVC_VAULT_KEY_FILE); for a legacy id, a key of that name is. */
  configured: boolean;
  /** True for an id that is a key name (secrets sealed before ids were derived): rotation moves them to the derived id. */
  legacy?: boolean;
  /** Whether it seals new data keys (the first configured key). */
  sealing: boolean;
  secrets: number;
}

/** VaultStatus answers `GET /api/vault/status`. */
export interface VaultStatus {
  /** Where this process's keys come from: `SVC_VAULT_KEYS`, `SVC_VAULT_KEY_FILE` or the default file's path. */
  key_source: string;
  secrets: number;
  keys: VaultKeyStatus[];
  /** True when some secret is sealed by a key other than the sealing one: `POST /api/vault/rotate` moves those it can open. */
  rotation_needed: boolean;
  /** Ids of keys that seal secrets in Redis and that this process lacks: it cannot open those secrets (and is not ready). */
  missing_keys: string[];
  /** How many secrets are sealed by the missing keys. */
  undecryptable: number;
}

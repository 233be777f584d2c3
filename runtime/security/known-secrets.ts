import { SecretMask } from './secret-mask.ts';

/**
 * KNOWN_MIN_BYTES: values shorter than this are not in the masking set. NOTE: the shortest value logs and the vault
 * mask; a shorter one ("on", a port) would mask ordinary words in every event.
 */
export const KNOWN_MIN_BYTES = 8;

/** VaultValues is what KnownSecrets reads of the vault (runtime/vault/vault-service.ts VaultService). */
export interface VaultValues {
  /** Whether this process can open the vault's secrets (it has a key); without, it holds no value to mask. */
  readonly readable: boolean;
  /** A text that changes whenever a secret is written, replaced or deleted. */
  revision(): Promise<string>;
  /** Every value the vault holds (of 8 bytes or more). */
  values(): Promise<string[]>;
  /**
   * A mark that stays the same while no write or delete was announced (undefined when changes are not announced
   * to this process): while it holds, the values read under it are current without reading the revision.
   */
  changeMark?(): string | undefined;
}

/** ResolvedSecrets is what KnownSecrets reads of the secrets a process resolves (child-env.ts SecretRefs). */
export interface ResolvedSecrets {
  /** The values of the variables `env:` refs may name, from this process's environment. */
  values(): string[];
  /** Every value this process resolved so far (it only grows). */
  readonly resolvedValues: ReadonlySet<string>;
}

/**
 * KnownSecrets is a process's masking set: every value it could hand to an agent or a server and that must never
 * come back out in what it writes. That is the values it resolved (SecretRefs), the values of the variables `env:`
 * refs may name (SECRET_ENV_ALLOWLIST, read from this process's environment), and every value of the vault.
 * NOTE: api, controller and runtime may be separate processes, and a value resolved in one (a runtime starting an
 * agent) can be handed to another (the agent's tool call reaching an api process); each process can open the whole
 * vault and reads the same allowlisted variables, so each knows the same set without any value crossing Redis.
 * `mask` is exact: it looks at the vault's revision (one GET, shared by the callers of the moment) and reads the
 * values again when it moved, or, while the vault announces its changes to this process (VaultStore's change
 * channel), trusts what it read until a change is announced; `current` is the set as last read, for the
 * synchronous log hook.
 */
export class KnownSecrets {
  private vault?: VaultValues;
  private vaultValues: string[] = [];
  private vaultRev = '';
  /** The vault's change mark when the revision was last read (undefined: not trusted). */
  private readMark?: string;
  private readonly envValues: string[];
  private built?: { mask: SecretMask; resolved: number };
  private inflight?: Promise<SecretMask>;
  private queued?: Promise<SecretMask>;

  constructor(private readonly refs: ResolvedSecrets) {
    this.envValues = refs.values().filter(long);
  }

  /** attachVault adds the vault's values to the set (the process connects the vault after its policy exists). */
  attachVault(vault: VaultValues): void {
    this.vault = vault;
    this.vaultRev = '';
    this.readMark = undefined;
    // NOTE: read at once, so the log hook masks the vault's values before anything else asked for the set.
    if (vault.readable) void this.mask().catch(() => undefined);
  }

  /**
   * current is the masking set as last read: resolved values are in it at once, vault values as of the last `mask`
   * (a vault change announced since starts a read in the background, for the lines that follow).
   */
  current(): SecretMask {
    if (this.vault?.readable && !this.inflight) {
      const mark = this.vault.changeMark?.();
      if (mark !== undefined && mark !== this.readMark) void this.mask().catch(() => undefined);
    }
    const resolved = this.refs.resolvedValues;
    if (!this.built || this.built.resolved !== resolved.size) {
      this.built = { mask: new SecretMask([...this.envValues, ...resolved, ...this.vaultValues]), resolved: resolved.size };
    }
    return this.built.mask;
  }

  /**
   * mask is the masking set as it stands now. NOTE: a caller arriving while a check is in flight waits for the next
   * one, since the one in flight may have read the revision before the caller's own vault write.
   */
  mask(): Promise<SecretMask> {
    if (!this.vault?.readable) return Promise.resolve(this.current());
    const mark = this.vault.changeMark?.();
    if (mark !== undefined && mark === this.readMark) return Promise.resolve(this.current());
    if (this.queued) return this.queued;
    if (!this.inflight) return this.check();
    const q = (this.queued = this.inflight.catch(() => undefined).then(() => {
      this.queued = undefined;
      return this.check();
    }));
    return q;
  }

  private check(): Promise<SecretMask> {
    const p = (async () => {
      const vault = this.vault!;
      // NOTE: the mark is taken before the revision is read: a change announced in between moves it, so it is read again.
      const mark = vault.changeMark?.();
      const rev = await vault.revision();
      if (rev !== this.vaultRev) {
        // NOTE: values read after the revision: a write in between moves the revision again, so the next check reads again.
        this.vaultValues = (await vault.values()).filter(long);
        this.vaultRev = rev;
        this.built = undefined;
      }
      this.readMark = mark;
      return this.current();
    })();
    this.inflight = p;
    void p.catch(() => undefined).finally(() => { if (this.inflight === p) this.inflight = undefined; });
    return p;
  }
}

const long = (v: string) => Buffer.byteLength(v, 'utf8') >= KNOWN_MIN_BYTES;

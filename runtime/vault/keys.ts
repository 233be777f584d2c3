import { createHash, randomBytes } from 'node:crypto';
import { closeSync, fstatSync, linkSync, lstatSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';

/** KEY_NAME is the grammar of the name a key is configured under (`name=base64`). */
const KEY_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** DERIVED_KEY_ID matches a key id derived from key bytes (vaultKeyId); any other id in a sealed value is a configured name. */
export const DERIVED_KEY_ID = /^sha256-[0-9a-f]{32}$/;

/**
 * vaultKeyId is the id of a key: `sha256-` and the first 128 bits of the SHA-256 of its bytes, in hex. NOTE: derived,
 * not chosen, so two different keys never share an id (two replicas each made a key named `k1`, and each took the
 * other's sealed values for its own); an operator can check it with `base64 -d | sha256sum`.
 */
export function vaultKeyId(key: Buffer): string {
  return `sha256-${createHash('sha256').update(key).digest('hex').slice(0, 32)}`;
}

/** ConfiguredVaultKey is a key-encryption key as configured: the name it is listed under and its 32 bytes. */
export interface ConfiguredVaultKey {
  name: string;
  key: Buffer;
}

/** VaultKey is one key-encryption key: its id (derived from its bytes, named in each sealed value), its name and its 32 bytes. */
export interface VaultKey {
  id: string;
  name: string;
  key: Buffer;
}

/**
 * VaultKeyring is the ordered list of key-encryption keys: the first seals every new data key, all of them open
 * (Kubernetes' encryption-at-rest rule: add a key, promote it to first, rotate, then remove the old one).
 */
export class VaultKeyring {
  readonly keys: readonly VaultKey[];
  private readonly byId: Map<string, Buffer>;
  private readonly byName: Map<string, Buffer>;

  constructor(configured: readonly ConfiguredVaultKey[]) {
    if (!configured.length) throw new Error('a vault keyring needs at least one key');
    this.keys = configured.map((k) => ({ id: vaultKeyId(k.key), name: k.name, key: k.key }));
    this.byId = new Map(this.keys.map((k) => [k.id, k.key]));
    this.byName = new Map(this.keys.map((k) => [k.name, k.key]));
    if (this.byId.size !== this.keys.length) throw new Error('a vault keyring lists one key twice');
  }

  /** primary is the key that seals. */
  get primary(): VaultKey {
    return this.keys[0];
  }

  /** ids lists the configured key ids, the sealing one first. */
  get ids(): string[] {
    return this.keys.map((k) => k.id);
  }

  /** get returns the bytes of a key id, or undefined when it is not configured. */
  get(id: string): Buffer | undefined {
    return this.byId.get(id);
  }

  /**
   * opener returns the key to try on a value whose sealed form names `id`: the key of that id or, for a value
   * sealed before ids were derived (its id is a configured name), the key configured under that name. NOTE: such a
   * name is ambiguous across replicas, so the data key's authentication decides; rotation moves those values to
   * derived ids.
   */
  opener(id: string): Buffer | undefined {
    return DERIVED_KEY_ID.test(id) ? this.byId.get(id) : this.byName.get(id);
  }
}

/** VaultKeySource says where the keys come from (Config.vault), as read from the environment. */
export interface VaultKeySource {
  /** SVC_VAULT_KEYS, verbatim ('' = unset). */
  keys: string;
  /** SVC_VAULT_KEY_FILE, resolved ('' = unset). */
  keyFile: string;
  /** The embedded default `$DATA_DIR/vault.key`, created when absent; '' when this process may not make one. */
  defaultFile: string;
}

/**
 * parseKeyList reads an ordered `name=base64` list (comma or line separated; `#` starts a comment line): the keys,
 * or every problem found. Each key must decode to exactly 32 bytes; names and keys are unique. A problem never
 * quotes a key.
 */
export function parseKeyList(text: string, source: string): { ok: true; keys: ConfiguredVaultKey[] } | { ok: false; problems: string[] } {
  const problems: string[] = [];
  const keys: ConfiguredVaultKey[] = [];
  const entries = text.split('\n').filter((l) => !l.trim().startsWith('#')).join(',').split(',').map((l) => l.trim()).filter(Boolean);
  entries.forEach((entry, i) => {
    const at = entry.indexOf('=');
    const name = at < 0 ? '' : entry.slice(0, at).trim();
    const b64 = at < 0 ? '' : entry.slice(at + 1).trim();
    if (!KEY_NAME.test(name)) { problems.push(`${source} entry ${i + 1} must be name=base64 with a name of 1-64 characters of A-Z a-z 0-9 _ . -`); return; }
    if (DERIVED_KEY_ID.test(name)) { problems.push(`${source} key "${name}" has the form of a derived key id (sha256-<hex>); choose another name`); return; }
    const key = Buffer.from(b64, 'base64');
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64) || key.length !== 32) { problems.push(`${source} key "${name}" must be 32 bytes in base64 (e.g. \`openssl rand -base64 32\`)`); return; }
    if (keys.some((k) => k.name === name)) { problems.push(`${source} names key "${name}" twice`); return; }
    const same = keys.find((k) => k.key.equals(key));
    if (same) { problems.push(`${source} lists the key of "${same.name}" again as "${name}"`); return; }
    keys.push({ name, key });
  });
  if (!entries.length) problems.push(`${source} holds no key (one name=base64 entry per line, the sealing key first)`);
  return problems.length ? { ok: false, problems } : { ok: true, keys };
}

/** VaultKeyError is a key configuration the service refuses to start with; the message says what to fix. */
export class VaultKeyError extends Error {}

/**
 * readKeyFile reads a key file after checking it is a regular file (not a symlink: whoever can re-point it chooses
 * the keys) readable by no one else: no bits for others, and group bits only when the group is the process's own
 * (a Kubernetes Secret mounted with `fsGroup` is `0440` root:<fsGroup>). NOTE: the check and the read use one
 * descriptor, so the file cannot be swapped in between.
 */
export function readKeyFile(file: string, variable: string): ConfiguredVaultKey[] {
  const l = lstatSync(file, { throwIfNoEntry: false });
  if (!l) throw new VaultKeyError(`${variable} ${file} does not exist`);
  if (l.isSymbolicLink()) throw new VaultKeyError(`${variable} ${file} is a symlink; point ${variable} at the file itself (in Kubernetes, mount the Secret with subPath)`);
  const fd = openSync(file, 'r');
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new VaultKeyError(`${variable} ${file} is not a regular file`);
    const mode = st.mode & 0o777;
    const ownGroup = st.gid === process.getgid?.();
    if (mode & 0o007 || (mode & 0o070 && !ownGroup) || mode & 0o022) {
      throw new VaultKeyError(`${variable} ${file} has mode ${mode.toString(8).padStart(4, '0')}: others must not read it; run \`chmod 600 ${file}\``);
    }
    const parsed = parseKeyList(readFileSync(fd, 'utf8'), `${variable} ${file}`);
    if (!parsed.ok) throw new VaultKeyError(parsed.problems.join('; '));
    return parsed.keys;
  } finally {
    closeSync(fd);
  }
}

/**
 * ensureDefaultKeyFile creates the embedded default key file (`$DATA_DIR/vault.key`, mode 0600, one random key
 * `k1`) when it does not exist. NOTE: written to a temporary file and hard-linked into place, so two processes
 * starting on one DATA_DIR cannot read a half-written file or each make a different key: the second link fails
 * and that process reads the first one's file.
 */
export function ensureDefaultKeyFile(file: string): void {
  if (lstatSync(file, { throwIfNoEntry: false })) return;
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, `# vault key-encryption keys: name=base64 of 32 bytes, the sealing key first; each key's id is derived from its bytes (README "Vault")\nk1=${randomBytes(32).toString('base64')}\n`);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    unlinkSync(tmp);
  }
}

/**
 * loadKeyring reads the keys of a source: SVC_VAULT_KEYS, else SVC_VAULT_KEY_FILE, else the embedded default file
 * (created when absent). Undefined when none is configured (the vault then answers 503); a VaultKeyError when
 * one is configured but unusable (the service refuses to start).
 */
export function loadKeyring(src: VaultKeySource): VaultKeyring | undefined {
  if (src.keys) {
    const parsed = parseKeyList(src.keys, 'SVC_VAULT_KEYS');
    if (!parsed.ok) throw new VaultKeyError(parsed.problems.join('; '));
    return new VaultKeyring(parsed.keys);
  }
  if (src.keyFile) return new VaultKeyring(readKeyFile(src.keyFile, 'SVC_VAULT_KEY_FILE'));
  if (!src.defaultFile) return undefined;
  ensureDefaultKeyFile(src.defaultFile);
  return new VaultKeyring(readKeyFile(src.defaultFile, 'the vault key file'));
}

import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { DERIVED_KEY_ID, type VaultKeyring } from './keys.ts';

/**
 * SEALED_PREFIX starts every sealed value; the id of the key that sealed its data key follows (as
 * `k8s:enc:aesgcm:v1:<key>:`): derived from the key's bytes, or in values sealed before ids were derived, the name the
 * key was configured under.
 */
export const SEALED_PREFIX = 'svc:enc:aesgcm:v1:';

const NONCE = 12;
const TAG = 16;
const DATA_KEY = 32;

/** VaultOpenError is a sealed value that does not open: an unknown key id, a wrong ref, or altered bytes. */
export class VaultOpenError extends Error {}

/** keyIdOf returns the id of the key that sealed a value's data key ('' when the value is not in the sealed form). */
export function keyIdOf(sealed: string): string {
  if (!sealed.startsWith(SEALED_PREFIX)) return '';
  const end = sealed.indexOf(':', SEALED_PREFIX.length);
  return end < 0 ? '' : sealed.slice(SEALED_PREFIX.length, end);
}

function gcm(key: Buffer, nonce: Buffer, aad: string, plain: Buffer): Buffer {
  const c = createCipheriv('aes-256-gcm', key, nonce);
  c.setAAD(Buffer.from(aad));
  const body = Buffer.concat([c.update(plain), c.final()]);
  return Buffer.concat([nonce, c.getAuthTag(), body]);
}

function ungcm(key: Buffer, packed: Buffer, aad: string): Buffer {
  if (packed.length < NONCE + TAG) throw new VaultOpenError('sealed value is truncated');
  const d = createDecipheriv('aes-256-gcm', key, packed.subarray(0, NONCE));
  d.setAAD(Buffer.from(aad));
  d.setAuthTag(packed.subarray(NONCE, NONCE + TAG));
  try {
    return Buffer.concat([d.update(packed.subarray(NONCE + TAG)), d.final()]);
  } catch {
    throw new VaultOpenError('sealed value does not open (another key under the same name in a value sealed before key ids were derived, altered bytes, or sealed for another ref)');
  }
}

// NOTE: both layers authenticate the ref, so a sealed value copied to another ref fails at the first layer that
// runs; the data-key layer also authenticates its key id, so the id in the prefix cannot be edited.
const dataKeyAad = (keyId: string, ref: string) => `svc-vault-dek\0${keyId}\0${ref}`;
const valueAad = (ref: string) => `svc-vault-value\0${ref}`;

/**
 * seal encrypts one value for one ref, envelope style: a fresh random 256-bit data key encrypts the value
 * (AES-256-GCM, a random 96-bit nonce, the ref as additional authenticated data), and the keyring's first key
 * seals the data key the same way. The stored form is
 * `svc:enc:aesgcm:v1:<key id>:<base64url(nonce|tag|sealed data key)>:<base64url(nonce|tag|ciphertext)>`.
 */
export function seal(ring: VaultKeyring, ref: string, value: string): string {
  const dataKey = randomBytes(DATA_KEY);
  try {
    const { id, key } = ring.primary;
    const wrapped = gcm(key, randomBytes(NONCE), dataKeyAad(id, ref), dataKey);
    const body = gcm(dataKey, randomBytes(NONCE), valueAad(ref), Buffer.from(value, 'utf8'));
    return `${SEALED_PREFIX}${id}:${wrapped.toString('base64url')}:${body.toString('base64url')}`;
  } finally {
    dataKey.fill(0);
  }
}

function parts(sealed: string): { keyId: string; wrapped: Buffer; body: string } {
  const keyId = keyIdOf(sealed);
  const rest = keyId ? sealed.slice(SEALED_PREFIX.length + keyId.length + 1).split(':') : [];
  if (rest.length !== 2) throw new VaultOpenError('not a sealed vault value');
  return { keyId, wrapped: Buffer.from(rest[0], 'base64url'), body: rest[1] };
}

function unwrap(ring: VaultKeyring, ref: string, keyId: string, wrapped: Buffer): Buffer {
  const kek = ring.opener(keyId);
  if (!kek) {
    const which = DERIVED_KEY_ID.test(keyId) ? 'which is not among this process\'s keys' : 'a key name this process does not configure';
    throw new VaultOpenError(`sealed by key "${keyId}", ${which} (SVC_VAULT_KEYS / SVC_VAULT_KEY_FILE)`);
  }
  const dataKey = ungcm(kek, wrapped, dataKeyAad(keyId, ref));
  if (dataKey.length !== DATA_KEY) throw new VaultOpenError('sealed data key has the wrong length');
  return dataKey;
}

/** open decrypts a sealed value of `ref` with whichever configured key sealed it; VaultOpenError when it cannot. */
export function open(ring: VaultKeyring, ref: string, sealed: string): string {
  const { keyId, wrapped, body } = parts(sealed);
  const dataKey = unwrap(ring, ref, keyId, wrapped);
  try {
    return ungcm(dataKey, Buffer.from(body, 'base64url'), valueAad(ref)).toString('utf8');
  } finally {
    dataKey.fill(0);
  }
}

/**
 * reseal re-seals a value's data key under the keyring's first key and keeps the encrypted value as it is
 * (rotation rewrites 60 bytes per secret, never a value). It returns the value unchanged when that key sealed it.
 */
export function reseal(ring: VaultKeyring, ref: string, sealed: string): string {
  const { keyId, wrapped, body } = parts(sealed);
  const { id, key } = ring.primary;
  if (keyId === id) return sealed;
  const dataKey = unwrap(ring, ref, keyId, wrapped);
  try {
    return `${SEALED_PREFIX}${id}:${gcm(key, randomBytes(NONCE), dataKeyAad(id, ref), dataKey).toString('base64url')}:${body}`;
  } finally {
    dataKey.fill(0);
  }
}

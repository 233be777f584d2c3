import { createCipheriv, randomBytes } from 'node:crypto';

/**
 * legacySeal writes a value in the form stored before key ids were derived from keys: the key's configured name in
 * the prefix and in the data key's authenticated data (the format of runtime/vault/envelope.ts, spelled out as a
 * fixture so the tests keep reading what older versions wrote).
 */
export function legacySeal(name: string, kek: Buffer, ref: string, value: string): string {
  const gcm = (key: Buffer, aad: string, plain: Buffer) => {
    const nonce = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', key, nonce);
    c.setAAD(Buffer.from(aad));
    const body = Buffer.concat([c.update(plain), c.final()]);
    return Buffer.concat([nonce, c.getAuthTag(), body]).toString('base64url');
  };
  const dataKey = randomBytes(32);
  return `svc:enc:aesgcm:v1:${name}:${gcm(kek, `svc-vault-dek\0${name}\0${ref}`, dataKey)}:${gcm(dataKey, `svc-vault-value\0${ref}`, Buffer.from(value))}`;
}

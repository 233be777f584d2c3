import { createHash, randomBytes } from 'node:crypto';
import type { ResourceStore } from '../../store/resource-store.ts';
import { canonicalJson } from '../../store/canonical.ts';

/** Binding is what an approval token is bound to; every field must match exactly at invoke. */
export interface Binding {
  tool_id: string;
  session_id: string;
  workspace_id: string;
  agent_name: string;
  input_digest: string;
}

/** inputDigest is `sha256:<hex>` of the compact JSON input, an absent input counting as `{}`. */
export function inputDigest(input: unknown): string {
  return `sha256:${createHash('sha256').update(JSON.stringify(input ?? {})).digest('hex')}`;
}

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
// NOTE: a used or expired token's record outlives its expiry by this much, so a late replay is named as such.
const TOMBSTONE_MS = 10 * 60_000;

/**
 * Approvals issues and consumes single-use tool approval tokens: 32 random bytes, base64url, of which only
 * the SHA-256 is stored, in Redis so any API replica can consume a token another issued.
 */
export class Approvals {
  constructor(private readonly store: ResourceStore) {}

  private key(token: string) { return this.store.keys.toolApproval(sha(token)); }

  async issue(b: Binding, ttlMs: number): Promise<{ approval_token: string; expires_at: string; input_digest: string; tool_id: string }> {
    const token = randomBytes(32).toString('base64url');
    const expires = Date.now() + ttlMs;
    await this.store.redis.set(this.key(token), JSON.stringify({ binding: sha(canonicalJson(b)), expires_at_ms: expires }), 'PX', ttlMs + TOMBSTONE_MS);
    return { approval_token: token, expires_at: new Date(expires).toISOString(), input_digest: b.input_digest, tool_id: b.tool_id };
  }

  /** consume checks a presented token against the invoke's binding and uses it up; it returns a reason code on failure. */
  async consume(token: string, b: Binding): Promise<string | undefined> {
    const r = await this.store.redis.consumeApproval(this.key(token), sha(canonicalJson(b)), Date.now());
    if (r === 'ok') return undefined;
    return r === 'replayed' ? 'approval_token_replayed' : r === 'expired' ? 'approval_token_expired' : 'approval_token_mismatch';
  }
}

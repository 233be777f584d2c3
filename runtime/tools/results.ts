import { isSecretKey, redactText } from '../sessions/redact.ts';
import { SecretMask } from '../security/secret-mask.ts';
import type { ContentBlock, ToolResult } from './types.ts';

const REDACTED = '[REDACTED]';
const PREVIEW_CHARS = 200;
const bytesOf = (s: string) => Buffer.byteLength(s, 'utf8');

// NOTE: one mask per array of values (a backend keeps its array), built once: every encoded form is in one expression.
const masks = new WeakMap<readonly string[], SecretMask>();

/**
 * redactString removes known secret values (e.g. an MCP server's resolved secret_env), in any form SecretMask knows
 * (the value, its base64 and URL encodings), and secret-looking tokens.
 */
export function redactString(s: string, secrets: string[]): { text: string; reason: string } {
  let mask = masks.get(secrets);
  if (!mask) masks.set(secrets, (mask = new SecretMask(secrets)));
  let text = mask.text(s);
  if (text !== s) return { text: redactText(text), reason: 'secret_value' };
  text = redactText(s);
  return { text, reason: text === s ? '' : 'secret_pattern' };
}

/**
 * shapeResult turns a backend's raw output into a ToolResult: secrets are redacted first (each redaction
 * recorded with its JSON pointer), then the result is cut to `maxBytes` (text cut on a character boundary,
 * later blocks and a structured value that no longer fits dropped) with `truncated` set.
 */
export function shapeResult(raw: { content: ContentBlock[]; structured?: unknown }, maxBytes: number, secrets: string[], durationMs: number): ToolResult {
  const redactions: ToolResult['redactions'] = [];
  const walk = (v: unknown, path: string): unknown => {
    if (typeof v === 'string') {
      const r = redactString(v, secrets);
      if (r.reason) redactions.push({ path, reason: r.reason, bytes: bytesOf(v) - bytesOf(r.text) });
      return r.text;
    }
    if (Array.isArray(v)) return v.map((x, i) => walk(x, `${path}/${i}`));
    if (v && typeof v === 'object') {
      return Object.fromEntries(Object.entries(v).map(([k, x]) => {
        const p = `${path}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`;
        // NOTE: a field with no value (undefined, as a built-in tool's result may hold before it is JSON) has nothing to hide.
        if (isSecretKey(k) && x !== null && x !== undefined && x !== '') {
          redactions.push({ path: p, reason: 'secret_field', bytes: bytesOf(JSON.stringify(x)) });
          return [k, REDACTED];
        }
        return [k, walk(x, p)];
      }));
    }
    return v;
  };
  const content = raw.content.map((b, i) => walk(b, `/content/${i}`) as ContentBlock);
  const structured = raw.structured === undefined ? null : walk(raw.structured, '/structured');

  const blockBytes = (b: ContentBlock) => (b.text !== undefined ? bytesOf(b.text) : bytesOf(JSON.stringify(b.data ?? null)));
  const structuredBytes = structured === null ? 0 : bytesOf(JSON.stringify(structured));
  const total = content.reduce((n, b) => n + blockBytes(b), 0) + structuredBytes;
  let kept = content;
  let keptStructured = structured;
  const truncated = total > maxBytes;
  if (truncated) {
    kept = [];
    let room = maxBytes;
    for (const b of content) {
      const n = blockBytes(b);
      if (n <= room) {
        kept.push(b);
        room -= n;
      } else {
        // NOTE: only text can be cut meaningfully; a binary block that does not fit is dropped whole.
        if (b.text !== undefined && room > 0) kept.push({ ...b, text: Buffer.from(b.text, 'utf8').subarray(0, room).toString('utf8').replace(/\uFFFD$/, '') });
        room = 0;
        break;
      }
    }
    if (structuredBytes > room) keptStructured = null;
  }
  const firstText = kept.find((b) => b.text !== undefined)?.text ?? '';
  return {
    artifacts: [], bytes: total, content: kept, duration_ms: durationMs, metadata: truncated ? { max_result_bytes: maxBytes, structured_dropped: structured !== null && keptStructured === null } : {},
    preview: firstText.slice(0, PREVIEW_CHARS), redactions, structured: keptStructured, truncated,
  };
}

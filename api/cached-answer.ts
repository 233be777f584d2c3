import type { Context } from 'koa';
import { MIN_ENCODED_BYTES, type CachedAnswer } from '../runtime/models/cached-answer.ts';

/**
 * sendAnswer answers a GET with a cached answer: 304 when the client's If-None-Match holds its ETag; else its
 * bytes, compressed (brotli or gzip, kept beside the JSON) when the client accepts a coding, as is otherwise.
 * `Cache-Control: no-cache` has clients revalidate each time, so a changed catalog is seen at once.
 */
export async function sendAnswer(ctx: Context, answer: CachedAnswer): Promise<void> {
  ctx.status = 200;
  ctx.type = 'application/json';
  ctx.etag = answer.etag;
  ctx.set('Cache-Control', 'no-cache');
  ctx.vary('Accept-Encoding');
  if (ctx.fresh) {
    ctx.status = 304;
    return;
  }
  const enc = answer.body.length >= MIN_ENCODED_BYTES ? ctx.acceptsEncodings('br', 'gzip', 'identity') : 'identity';
  if (enc === 'br' || enc === 'gzip') {
    ctx.set('Content-Encoding', enc);
    ctx.body = await answer.encode(enc);
    return;
  }
  ctx.body = answer.body;
}

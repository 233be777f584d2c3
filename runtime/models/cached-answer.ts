import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import zlib from 'node:zlib';

/** Encoding is a content coding a cached answer is kept in besides its JSON bytes. */
export type Encoding = 'br' | 'gzip';

/** MIN_ENCODED_BYTES: a smaller answer is sent as is (compressing it saves less than the header costs). */
export const MIN_ENCODED_BYTES = 1024;

const gzip = promisify(zlib.gzip);
const brotli = promisify(zlib.brotliCompress);

/**
 * CachedAnswer is one listing's answer, kept for as long as the catalog generation it was built from: its JSON
 * bytes, a strong ETag (their SHA-1), and, compressed once on first demand, its gzip and brotli bytes. NOTE: the
 * full listing is 1.4 MiB of JSON and compresses about 40 to 70 times (gzip level 6, brotli quality 5: each
 * about 30 ms once, on libuv's thread pool); sending 20 to 40 KiB instead of 1.4 MiB is what shortens a listing's
 * tail, and a client that revalidates with If-None-Match gets a 304 and no body at all.
 */
export class CachedAnswer {
  readonly etag: string;
  private readonly encoded = new Map<Encoding, Promise<Buffer>>();

  constructor(readonly body: Buffer) {
    this.etag = `"${createHash('sha1').update(body).digest('base64url')}"`;
  }

  /** encode answers the body in a content coding, compressing it the first time (concurrent callers share that). */
  encode(enc: Encoding): Promise<Buffer> {
    let done = this.encoded.get(enc);
    if (!done) {
      done = enc === 'br'
        ? brotli(this.body, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 5, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: this.body.length } })
        : gzip(this.body, { level: 6 });
      this.encoded.set(enc, done);
      done.catch(() => this.encoded.delete(enc));
    }
    return done;
  }
}

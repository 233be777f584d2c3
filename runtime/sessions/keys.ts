import type { Keys } from '../../store/keys.ts';

/** SessionKeys names the Redis keys of the session runtime, under the store's prefix. */
export class SessionKeys {
  constructor(private readonly k: Keys) {}
  lease(id: string) { return `${this.k.prefix}session:${id}:lease`; }
  permissions(id: string) { return `${this.k.prefix}session:${id}:permissions`; }
  queue(id: string) { return `${this.k.prefix}session:${id}:queue`; }
  reap(id: string) { return `${this.k.prefix}session:${id}:reap`; }
  token(hash: string) { return `${this.k.prefix}session-token:${hash}`; }
  commands(owner: string) { return `${this.k.prefix}runtime:${owner}:cmd`; }
  get starts() { return `${this.k.prefix}sessions:starts`; }
  get live() { return `${this.k.prefix}sessions:live`; }
}

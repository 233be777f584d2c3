import type { Keys } from '../../store/keys.ts';

/** SessionKeys names the Redis keys of the session runtime, under the store's prefix. */
export class SessionKeys {
  constructor(private readonly k: Keys) {}
  lease(id: string) { return `${this.k.session(id)}lease`; }
  permissions(id: string) { return `${this.k.session(id)}permissions`; }
  queue(id: string) { return `${this.k.session(id)}queue`; }
  reap(id: string) { return `${this.k.session(id)}reap`; }
  token(hash: string) { return `${this.k.sessions}token:${hash}`; }
  commands(owner: string) { return this.k.runtimeCommands(owner); }
  get starts() { return `${this.k.sessions}starts`; }
  get live() { return `${this.k.sessions}live`; }
}

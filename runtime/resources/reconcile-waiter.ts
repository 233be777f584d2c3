import type { Redis } from 'ioredis';
import { member } from '../../store/keys.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import { duplicateConnection } from '../../store/connections.ts';

/**
 * ReconcileWaiter lets `?wait=true` writes answer once their revision is reconciled. Controllers publish the
 * key of every reconcile (write-status-3.lua, reconcile-write-n.lua); a waiter re-reads the key's observed revision on each
 * message, so a message that arrives before the waiter subscribed cannot be missed.
 */
export class ReconcileWaiter {
  private sub?: Redis;
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly listeners = new Set<(keys: string[]) => void>();

  constructor(private readonly store: ResourceStore) {}

  async start(): Promise<void> {
    this.sub = duplicateConnection(this.store.redis);
    // NOTE: a batch of reconciles announces its keys in one message, one per line.
    this.sub.on('message', (_channel: string, message: string) => {
      if (!this.waiters.size && !this.listeners.size) return;
      const keys = message.split('\n');
      for (const key of keys) for (const wake of this.waiters.get(key) ?? []) wake();
      for (const listen of this.listeners) listen(keys);
    });
    await this.sub.subscribe(this.store.keys.reconciled);
  }

  async stop(): Promise<void> {
    this.sub?.disconnect();
  }

  /**
   * onReconciled calls `listen` with the keys (`member(kind, id)`) of each reconcile announcement, through this
   * process's one subscription; it returns the unsubscribe function.
   */
  onReconciled(listen: (keys: string[]) => void): () => void {
    this.listeners.add(listen);
    return () => this.listeners.delete(listen);
  }

  /** wait resolves true once the key's reconcile observed `revision`, or false at the timeout. */
  async wait(kind: string, id: string, revision: number, timeoutMs: number): Promise<boolean> {
    const key = member(kind, id);
    const done = async () => (await this.store.observedRevision(kind, id)) >= revision;
    return new Promise<boolean>((resolve) => {
      let settled = false;
      const finish = (ok: boolean) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.waiters.get(key)?.delete(check);
        if (this.waiters.get(key)?.size === 0) this.waiters.delete(key);
        resolve(ok);
      };
      const check = () => { done().then((ok) => ok && finish(true), () => undefined); };
      const timer = setTimeout(() => finish(false), timeoutMs);
      if (!this.waiters.has(key)) this.waiters.set(key, new Set());
      this.waiters.get(key)!.add(check);
      check();
    });
  }
}

import { ChannelSignals } from '../../store/channel-signals.ts';
import { member } from '../../store/keys.ts';
import type { ResourceStore } from '../../store/resource-store.ts';

/** How often a wait reads the observed revision when the channel could not be subscribed to. */
const UNSUBSCRIBED_POLL_MS = 25;

/**
 * ReconcileWaiter lets `?wait=true` writes answer once their revision is reconciled. Controllers announce the
 * key of every reconcile on the `reconciled` channel (write-status-3.lua; reconcile-write-n.lua announces a batch
 * in one message, a key per line); a waiter re-reads the key's observed revision on each announcement, so one that
 * arrives before the waiter listened cannot be missed (ChannelSignals).
 */
export class ReconcileWaiter {
  private readonly signals: ChannelSignals;

  constructor(private readonly store: ResourceStore) {
    this.signals = new ChannelSignals(store.redis, store.keys.reconciled);
  }

  async stop(): Promise<void> {
    this.signals.stop();
  }

  /**
   * onReconciled calls `listen` with the keys (`member(kind, id)`) of each reconcile announcement, through this
   * process's one subscription, until closed; state read after `ready` misses no announcement.
   */
  onReconciled(listen: (keys: string[]) => void): { ready: Promise<boolean>; close(): void } {
    return this.signals.onMessage(listen);
  }

  /** wait resolves true once the key's reconcile observed `revision`, or false at the timeout. */
  async wait(kind: string, id: string, revision: number, timeoutMs: number): Promise<boolean> {
    // NOTE: a failed read counts as not yet; the next announcement (or the deadline) decides.
    const observed = () => this.store.observedRevision(kind, id).catch(() => -1);
    const done = (await this.signals.until(member(kind, id), observed, (seen) => seen >= revision, { timeoutMs, pollMs: UNSUBSCRIBED_POLL_MS })) >= revision;
    // NOTE: what the caller reads next must include the projection it waited for (RegistryWatch.recheck).
    if (done) this.store.registryWatch?.recheck();
    return done;
  }
}

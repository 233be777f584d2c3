import { createRequire } from 'node:module';
import { Redis } from 'ioredis';

// NOTE: ioredis' own slot function (its dependency), so the guard computes slots exactly as a Cluster client routes.
const slotOf = createRequire(import.meta.url)('cluster-key-slot') as (key: string | Buffer) => number;

/** The installed guards, the last one watching; `unpatched` is ioredis' own sendCommand while one is installed. */
const stack: SlotGuard[] = [];
let unpatched: Redis['sendCommand'] | undefined;

/** SlotViolation is one command, transaction or pipeline whose keys span two hash slots. */
export interface SlotViolation {
  what: string;
  keys: string[];
}

interface GuardedCommand {
  name: string;
  args: unknown[];
  inTransaction?: boolean;
  getKeys(): (string | Buffer)[];
}

/**
 * SlotGuard watches every command any ioredis connection of this process sends and records each that a Redis
 * Cluster would refuse or ioredis would not route: a command (a script's KEYS, MGET, a DEL of several keys) whose
 * keys span two hash slots, and a MULTI or a pipeline whose commands do. It runs against one Redis, so every
 * suite checks the one-slot key rule without a cluster; keys a script builds from ARGV are seen
 * only by the cluster runs (test/cluster.mocharc.cjs), where Redis refuses them.
 */
export class SlotGuard {
  readonly violations: SlotViolation[] = [];
  private readonly batches = new WeakMap<object, { slots: Set<number>; keys: string[]; names: string[]; reported: boolean }>();

  /** install makes this guard the one that watches (a guard installed later, e.g. by a test, takes over until uninstalled). */
  install(): this {
    if (stack.includes(this)) return this;
    if (!stack.length) {
      const original = (unpatched = Redis.prototype.sendCommand);
      Redis.prototype.sendCommand = function (this: Redis, command: GuardedCommand, stream?: { isPipeline?: boolean }) {
        stack.at(-1)?.check(command, stream);
        return original.call(this, command as never, stream as never);
      } as Redis['sendCommand'];
    }
    stack.push(this);
    return this;
  }

  uninstall(): void {
    const at = stack.indexOf(this);
    if (at >= 0) stack.splice(at, 1);
    if (!stack.length && unpatched) { Redis.prototype.sendCommand = unpatched; unpatched = undefined; }
  }

  /** check records a command's keys, and adds them to its pipeline's when it is part of one. */
  check(command: GuardedCommand, stream?: { isPipeline?: boolean }): void {
    // NOTE: RENAME moves a key between slots only in the one-Redis upgrade of the old key layout
    // (store/key-migration.ts), which never runs on a cluster.
    if (command.name === 'rename') return;
    let keys: string[];
    try { keys = command.getKeys().map(String); } catch { return; }
    if (!keys.length) return;
    const slots = new Set(keys.map((k) => slotOf(k)));
    if (slots.size > 1) this.violations.push({ what: describe(command), keys });
    if (!stream?.isPipeline) return;
    let batch = this.batches.get(stream);
    if (!batch) this.batches.set(stream, (batch = { slots: new Set(), keys: [], names: [], reported: false }));
    for (const s of slots) batch.slots.add(s);
    batch.keys.push(...keys);
    batch.names.push(command.name);
    if (batch.slots.size > 1 && !batch.reported) {
      batch.reported = true;
      this.violations.push({ what: `${command.inTransaction ? 'MULTI' : 'pipeline'} (${batch.names.join(', ')})`, keys: batch.keys });
    }
  }
}

function describe(c: GuardedCommand): string {
  if (c.name === 'evalsha' || c.name === 'eval') return `${c.name} ${String(c.args[0]).slice(0, 12)}`;
  return c.name;
}

/**
 * mochaHooks is the root hook plugin `make test` loads (`--require test/helpers/slot-guard.ts`): the guard watches
 * the whole run and a closing check fails it, naming each command, when any keys spanned two slots.
 */
export const mochaHooks = {
  beforeAll(this: unknown) { guard.install(); },
  afterAll() {
    guard.uninstall();
    if (!guard.violations.length) return;
    const seen = new Set<string>();
    const lines = guard.violations.filter((v) => { const k = `${v.what} ${v.keys.join(' ')}`; if (seen.has(k)) return false; seen.add(k); return true; })
      .slice(0, 50).map((v) => `  ${v.what}: ${v.keys.join(', ')}`);
    throw new Error(`commands whose keys span two Redis Cluster hash slots (DESIGN.md "Store"):\n${lines.join('\n')}`);
  },
};

const guard = new SlotGuard();

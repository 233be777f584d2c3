import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';
import { defineScripts } from './scripts.ts';

/** StoredDelivery is the JSON a delivery's row holds; the store does not interpret it beyond these fields. */
export interface StoredDelivery {
  id: string;
  event_id: string;
  event_type: string;
  preset: string;
  bridge_id: string;
  status: string;
  created_at: string;
}

/** DeliveryQuery narrows a delivery listing; every field is optional. */
export interface DeliveryQuery {
  preset?: string;
  event?: string;
  bridge?: string;
  status?: string;
  limit: number;
}

const DEFAULT_DELIVERY_RETENTION = 10_000;

type NotificationCommands = {
  putPreset(key: string, name: string, expected: string, next: string): Promise<number>;
  createDeliveries(numKeys: number, ...args: (string | number)[]): Promise<number[]>;
};

/**
 * NotificationStore keeps notification presets and delivery rows in Redis under one hash tag, `{notify}`:
 * `presets` (hash name → preset json, written with put-preset-1.lua), `deliveries` (hash id → row json) with
 * `deliveries:by-time` (zset id by creation, trimmed to about `retention` rows), and `pending:<bridge>` (the
 * deliveries to a bridge still waiting, so a bridge that comes back can have them retried at once).
 */
export class NotificationStore {
  private readonly base: string;

  constructor(readonly redis: Redis, keys: Keys, readonly retention = DEFAULT_DELIVERY_RETENTION) {
    this.base = `${keys.prefix}{notify}:`;
    defineScripts();
  }

  get presetsKey() { return `${this.base}presets`; }
  private get deliveriesKey() { return `${this.base}deliveries`; }
  private get byTimeKey() { return `${this.base}deliveries:by-time`; }
  private pendingKey(bridge: string) { return `${this.base}pending:${bridge}`; }

  /** presets returns every stored preset's json by name. */
  async presets(): Promise<Record<string, string>> {
    return this.redis.hgetall(this.presetsKey);
  }

  /** preset returns one stored preset's json, or undefined. */
  async preset(name: string): Promise<string | undefined> {
    return (await this.redis.hget(this.presetsKey, name)) ?? undefined;
  }

  /**
   * putPreset writes a preset with compare-and-set (put-preset-1.lua): `expected` "" = create only if absent;
   * `next` "" = delete. It returns false when the stored preset is not what the caller expected.
   */
  async putPreset(name: string, expected: string, next: string): Promise<boolean> {
    return (await (this.redis as Redis & NotificationCommands).putPreset(this.presetsKey, name, expected, next)) === 1;
  }

  /** seedPreset stores a preset only if none has its name (built-ins at start-up); true when it wrote. */
  async seedPreset(name: string, json: string): Promise<boolean> {
    return (await this.redis.hsetnx(this.presetsKey, name, json)) === 1;
  }

  /**
   * deliveries returns the stored rows of the given ids (undefined where absent), in order.
   */
  async deliveries(ids: string[]): Promise<(string | undefined)[]> {
    if (!ids.length) return [];
    return (await this.redis.hmget(this.deliveriesKey, ...ids)).map((v) => v ?? undefined);
  }

  /**
   * createDeliveries stores each row whose id is not stored yet (a redelivered bus page never resets a row) and
   * marks it pending for its bridge; returns which were created.
   */
  async createDeliveries(rows: StoredDelivery[]): Promise<boolean[]> {
    if (!rows.length) return [];
    const keys = [this.deliveriesKey, this.byTimeKey];
    const pending = new Map<string, number>();
    const args: (string | number)[] = [];
    for (const r of rows) {
      let at = 0;
      if (r.status === 'pending') {
        at = pending.get(r.bridge_id) ?? keys.push(this.pendingKey(r.bridge_id));
        pending.set(r.bridge_id, at);
      }
      args.push(r.id, JSON.stringify(r), Date.parse(r.created_at), at);
    }
    const created = await (this.redis as Redis & NotificationCommands).createDeliveries(keys.length, ...keys, ...args);
    return created.map((c) => c === 1);
  }

  /** updateDeliveries overwrites rows in one transaction; a row that left `pending` leaves its bridge's pending set. */
  async updateDeliveries(rows: StoredDelivery[]): Promise<void> {
    if (!rows.length) return;
    const pipe = this.redis.multi().hset(this.deliveriesKey, ...rows.flatMap((r) => [r.id, JSON.stringify(r)]));
    const left = new Map<string, string[]>();
    for (const r of rows) if (r.status !== 'pending') left.set(r.bridge_id, [...(left.get(r.bridge_id) ?? []), r.id]);
    for (const [bridge, ids] of left) pipe.srem(this.pendingKey(bridge), ...ids);
    await pipe.exec();
  }

  /** pendingFor lists the ids of deliveries to a bridge still waiting to succeed. */
  async pendingFor(bridge: string): Promise<string[]> {
    return this.redis.smembers(this.pendingKey(bridge));
  }

  /** trim drops the oldest rows beyond the retention. */
  async trim(): Promise<void> {
    const excess = (await this.redis.zcard(this.byTimeKey)) - this.retention;
    if (excess <= 0) return;
    const ids = await this.redis.zrange(this.byTimeKey, 0, excess - 1);
    if (!ids.length) return;
    const rows = await this.deliveries(ids);
    const pipe = this.redis.multi().hdel(this.deliveriesKey, ...ids).zrem(this.byTimeKey, ...ids);
    rows.forEach((r, i) => {
      if (r) pipe.srem(this.pendingKey((JSON.parse(r) as StoredDelivery).bridge_id), ids[i]);
    });
    await pipe.exec();
  }

  /** listDeliveries returns the newest rows matching the query (json) and how many rows match in all. */
  async listDeliveries(q: DeliveryQuery): Promise<{ rows: string[]; total: number }> {
    const rows: string[] = [];
    let total = 0;
    const PAGE = 500;
    for (let start = 0; ; start += PAGE) {
      const ids = await this.redis.zrevrange(this.byTimeKey, start, start + PAGE - 1);
      if (!ids.length) break;
      for (const raw of await this.deliveries(ids)) {
        if (!raw) continue;
        const r = JSON.parse(raw) as StoredDelivery;
        if ((q.preset && r.preset !== q.preset) || (q.bridge && r.bridge_id !== q.bridge) || (q.status && r.status !== q.status)
          || (q.event && r.event_id !== q.event && r.event_type !== q.event)) continue;
        total++;
        if (rows.length < q.limit) rows.push(raw);
      }
      if (ids.length < PAGE) break;
    }
    return { rows, total };
  }
}

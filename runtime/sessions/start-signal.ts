import type { Redis } from 'ioredis';
import { ChannelSignals } from '../../store/channel-signals.ts';
import type { Keys } from '../../store/keys.ts';

/**
 * startedChannel is the Redis pub/sub channel on which a runtime announces that a session left `starting`
 * (active, or stopped because it could not start); the message is the session id. Every api replica hears it.
 * NOTE: classic pub/sub, not sharded: on a Redis Cluster a message reaches every node over the cluster bus, so the
 * rate of session starts (one small message each) is what it costs; the channel carries the `{sessions}` tag so a
 * move to SPUBLISH/SSUBSCRIBE (one slot's master) needs no rename.
 */
export const startedChannel = (keys: Keys) => `${keys.sessions}started`;

/** signalStarted announces a session's start (or failed start); an outage only costs the waiter a poll. */
export async function signalStarted(redis: Redis, keys: Keys, sessionId: string): Promise<void> {
  await redis.publish(startedChannel(keys), sessionId).catch(() => undefined);
}

/** startSignals lets the API wait for a session's start (`listen(sessionId)`) without polling its record. */
export function startSignals(redis: Redis, keys: Keys): ChannelSignals {
  return new ChannelSignals(redis, startedChannel(keys));
}

import type { Outcome } from '../../store/event-bus.ts';

/** DeliveryMode is how a bridge posts a notification: a direct send or a reply. */
export type DeliveryMode = 'direct-send' | 'reply';

/** PresetTarget is one bridge a preset delivers to. */
export interface PresetTarget {
  bridge_id: string;
  canonical_route: string;
  delivery_mode: DeliveryMode;
  display_name: string;
}

/** NotificationPreset is the spec's NotificationPreset. */
export interface NotificationPreset {
  name: string;
  built_in: boolean;
  enabled: boolean;
  events: string[];
  filter: string;
  targets: PresetTarget[];
  default_version: string;
  default_hash: string;
  default_update_available: boolean;
  user_modified: boolean;
  created_at: string;
  updated_at: string;
}

/** DeliveredEvent is the body a bridge receives. */
export interface DeliveredEvent {
  id: string;
  type: string;
  workspace_id?: string;
  agent?: string;
  provider?: string;
  task_id?: string;
  run_id?: string;
  summary?: string;
  outcome: Outcome;
  /** The event's position on the bus (monotonic across all events; from its stream id). */
  sequence: number;
  payload?: Record<string, unknown>;
  timestamp: string;
}

/** DeliveryStatus is where one (event, preset, bridge) delivery stands. */
export type DeliveryStatus = 'pending' | 'delivered' | 'failed' | 'skipped';

/** DeliveryRecord is the readable state of one delivery (GET /api/notifications/deliveries). */
export interface DeliveryRecord {
  /** `${event_id}:${preset}:${bridge_id}`; also the Idempotency-Key the receiver sees. */
  id: string;
  event_id: string;
  event_type: string;
  preset: string;
  bridge_id: string;
  status: DeliveryStatus;
  attempts: number;
  last_error: string;
  /** The last HTTP status the receiver answered (0: none, e.g. connection refused). */
  last_status: number;
  created_at: string;
  updated_at: string;
  delivered_at: string;
}

/** DeliveryJob is what the `notify` queue carries for one delivery (a retry after its first attempt in a batch). */
export interface DeliveryJob {
  delivery_id: string;
  preset: string;
  bridge_id: string;
  /** When the delivery row was created (the router saw the event). */
  created_at: string;
  event: DeliveredEvent;
  /** The attempts already made before this job (in its batch); absent = none. */
  attempts_made?: number;
}

/**
 * DeliveryBatch is what the `notify` queue carries for one routed bus page's deliveries to one bridge: each is
 * attempted once; the ones the receiver did not take go on as DeliveryJobs (retries with backoff).
 */
export interface DeliveryBatch {
  bridge_id: string;
  deliveries: DeliveryJob[];
}

/** NotificationSettings tunes delivery (NOTIFY_* environment). */
export interface NotificationSettings {
  /** Deliveries in flight at once per controller process. */
  concurrency: number;
  /** Attempts per delivery before it is failed. */
  attempts: number;
  /** First retry delay; each retry doubles it up to maxBackoffMs. */
  backoffMs: number;
  maxBackoffMs: number;
  /** One POST's deadline. */
  timeoutMs: number;
  /** How often a Connected bridge's receiver is checked again. */
  healthIntervalMs: number;
}

/** DEFAULT_NOTIFICATION_SETTINGS hold when the process configuration sets nothing. */
export const DEFAULT_NOTIFICATION_SETTINGS: NotificationSettings = {
  concurrency: 16, attempts: 25, backoffMs: 500, maxBackoffMs: 600_000, timeoutMs: 5_000, healthIntervalMs: 30_000,
};

import type { BusEventInput, Outcome } from '../../store/event-bus.ts';
import type { DeliveryRecord } from './types.ts';

/**
 * DELIVERY_UPDATED is the bus event a delivery row publishes when it is created and whenever its status or attempt
 * count changes, so readers of the bus (the console's deliveries page) see deliveries move. NOTE: the router
 * never routes it (a delivery about a delivery would make another, without end), so presets cannot match it.
 */
export const DELIVERY_UPDATED = 'notification.delivery_updated';

const OUTCOMES: Record<DeliveryRecord['status'], Outcome> = { pending: 'info', delivered: 'success', failed: 'failure', skipped: 'warning' };

/**
 * deliveryUpdated is the bus event of one delivery row as just stored: its refs (delivery, event, preset, bridge),
 * status, attempts and the receiver's last HTTP status; never the delivered payload nor the error text.
 */
export function deliveryUpdated(row: DeliveryRecord, workspaceId: string | undefined): BusEventInput {
  const outcome = row.status === 'pending' && row.attempts > 0 ? 'warning' : OUTCOMES[row.status];
  return {
    type: DELIVERY_UPDATED, source: 'notifications', workspace_id: workspaceId ?? '', outcome,
    summary: `delivery of ${row.event_type} to bridge ${row.bridge_id} (preset ${row.preset}) ${row.status}`,
    data: {
      delivery_id: row.id, event_id: row.event_id, event_type: row.event_type, preset: row.preset, bridge_id: row.bridge_id,
      status: row.status, attempts: row.attempts, last_status: row.last_status,
    },
  };
}

import { createHash } from 'node:crypto';
import { MAX_NAME_LENGTH } from '../../codecs/limits.ts';
import type { EventBus } from '../../store/event-bus.ts';
import type { ModelCatalogStore } from '../../store/model-catalog-store.ts';
import { PRIORITY, PROVIDER_ID, type ModelRow, type StoredStatus } from './types.ts';

/** MAX_ACP_SOURCES bounds the agents whose reports the catalog keeps; past it the least recently written goes. */
export const MAX_ACP_SOURCES = 256;
/** MAX_ACP_MODELS bounds the models kept of one agent's report. */
export const MAX_ACP_MODELS = 256;
/** REWRITE_MS: an unchanged report rewrites its times (last_refresh, freshness) at most this often. */
export const REWRITE_MS = 60_000;

/** AgentModelReport is what a session start saw: the agent, its definition's provider ('' for none), the models it offered. */
export interface AgentModelReport {
  agent: string;
  provider: string;
  models: { id: string; name: string }[];
}

/**
 * acpSourceId is an agent's `acp_session` source id: `acp_session:<slug>`, the slug being the agent name when it
 * already fits the source id grammar, else its lower-cased form with other characters as `-` and a short hash of
 * the name (so `Reviewer.v2` and `reviewer-v2` stay two sources).
 */
export function acpSourceId(agent: string): string {
  if (/^[a-z0-9][a-z0-9_-]*$/.test(agent) && agent.length <= 64) return `acp_session:${agent}`;
  const slug = agent.toLowerCase().replace(/[^a-z0-9_-]+/g, '-').replace(/^[-_]+/, '').slice(0, 48) || 'agent';
  return `acp_session:${slug}-${createHash('sha256').update(agent).digest('hex').slice(0, 8)}`;
}

/** AcpSessionSourceOptions wire the acp_session source. */
export interface AcpSessionSourceOptions {
  store: ModelCatalogStore;
  /** Where a changed report is announced (`provider.model_catalog_refreshed`, as a refresh is). */
  bus?: EventBus;
  /** Called when an agent's reported models changed (agents' ModelKnown checks re-run). */
  onChange?: () => Promise<unknown>;
}

/**
 * AcpSessionSource is the catalog's `acp_session` source: the models an ACP agent offers when a session starts
 * (runtime/sessions/acp-caps.ts), one source per agent (`acp_session:<agent>`), rows under the agent definition's
 * `provider` (or, when it names none or one outside the provider grammar, under the agent's slug, e.g. `scripted`).
 * Rows are live observations: `available: true` while fresh. NOTE: kept in Redis under the catalog's `{models}` tag
 * by one script that writes nothing for a repeated report (so session starts do not churn every process's merge)
 * and keeps at most MAX_ACP_SOURCES agents.
 */
export class AcpSessionSource {
  constructor(private readonly o: AcpSessionSourceOptions) {}

  /** record stores one report; it answers whether the stored models changed, only the times were rewritten, or nothing was written. */
  async record(r: AgentModelReport, now = Date.now()): Promise<'unchanged' | 'refreshed' | 'changed'> {
    const sourceId = acpSourceId(r.agent);
    const slug = sourceId.slice('acp_session:'.length);
    const provider = PROVIDER_ID.test(r.provider) && r.provider.length <= MAX_NAME_LENGTH ? r.provider : slug;
    const at = new Date(now).toISOString();
    const seen = new Set<string>();
    const rows: ModelRow[] = [];
    for (const m of r.models) {
      if (!m.id || m.id.length > 253 || seen.has(m.id) || rows.length >= MAX_ACP_MODELS) continue;
      seen.add(m.id);
      rows.push({
        provider_id: provider, model_id: m.id, source_id: sourceId, source_kind: 'acp_session', priority: PRIORITY.acp_session, refreshed_at: at, stale: false,
        available: true, ...(m.name && m.name !== m.id ? { display_name: m.name } : {}),
      });
    }
    const digest = createHash('sha256').update(JSON.stringify([r.agent, provider, rows.map((x) => [x.model_id, x.display_name ?? ''])])).digest('hex');
    const status: StoredStatus & { digest: string } = {
      source_id: sourceId, source_kind: 'acp_session', provider_id: provider, priority: PRIORITY.acp_session, last_refresh: at, next_refresh: '',
      last_success: at, last_error: '', refresh_state: 'succeeded', row_count: rows.length, stale: false, digest,
    };
    const outcome = await this.o.store.report(status, rows, { now, refreshMs: REWRITE_MS, maxSources: MAX_ACP_SOURCES });
    if (outcome === 'changed') {
      await this.o.bus?.publish({
        type: 'provider.model_catalog_refreshed', source: 'models', outcome: 'success', agent_name: r.agent, summary: `${sourceId}: ${rows.length} models reported by agent ${r.agent}`,
        data: { provider, source_id: sourceId, row_count: rows.length, agent: r.agent },
      });
      await this.o.onChange?.();
    }
    return outcome;
  }
}

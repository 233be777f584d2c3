import type { MemoryStore } from '../../store/memory-store.ts';
import type { DailyLog, Partition, StoredDecision } from './types.ts';

/** DailyLimits are a daily log segment's rotation limits (5000 lines, 1 MiB). */
export interface DailyLimits {
  maxLines: number;
  maxBytes: number;
}

export const DEFAULT_DAILY: DailyLimits = { maxLines: 5000, maxBytes: 1024 * 1024 };

/** partitionOf reads a partition key back (store/memory-store.ts partitionKey). */
export function partitionOf(key: string): Partition {
  const d = decodeURIComponent;
  const p = key.split(':');
  if (p[0] === 'g') return { scope: 'global', workspace_id: '', agent_name: '', agent_tier: '' };
  if (p[0] === 'w') return { scope: 'workspace', workspace_id: d(p[1]), agent_name: '', agent_tier: '' };
  if (p[1] === 'g') return { scope: 'agent', workspace_id: '', agent_name: d(p[2]), agent_tier: 'global' };
  return { scope: 'agent', workspace_id: d(p[2]), agent_name: d(p[3]), agent_tier: 'workspace' };
}

/** scopeDir is where a partition's files sit when memories are exported as markdown. */
export function scopeDir(p: Partition): string {
  if (p.scope === 'global') return 'global';
  if (p.scope === 'workspace') return `workspaces/${p.workspace_id}`;
  return p.agent_tier === 'global' ? `agents/${p.agent_name}` : `workspaces/${p.workspace_id}/agents/${p.agent_name}`;
}

/**
 * DailyLogs is each scope's append-only log of memory operations per UTC day: one markdown line per stored
 * decision (what, which file, why, who), in segments `{date}.{seq}.md` that rotate at the line and byte limits.
 */
export class DailyLogs {
  constructor(private readonly o: { store: MemoryStore; limits?: Partial<DailyLimits> }) {}

  private get limits(): DailyLimits { return { ...DEFAULT_DAILY, ...this.o.limits }; }

  /** record appends a decision's line to its scope's log of the day it was decided. */
  async record(partition: string, d: StoredDecision): Promise<void> {
    const time = d.decided_at.slice(11, 19);
    const what = d.reverts ? `revert of ${d.reverts} (${d.op})` : d.op;
    const line = `- ${time}Z ${what} ${d.target_filename || '(none)'} [${d.id}] by ${d.origin}: ${d.reason.replace(/\s+/g, ' ')}`;
    await this.o.store.appendDaily(partition, d.decided_at.slice(0, 10), line, this.limits.maxLines, this.limits.maxBytes);
  }

  /** list returns the logs of the partitions `visible` accepts, newest day first, then by segment. */
  async list(q: { accept: (p: Partition) => boolean; date?: string; limit: number }): Promise<DailyLog[]> {
    const index = (await this.o.store.dailyIndex())
      .filter((e) => (!q.date || e.date === q.date) && q.accept(partitionOf(e.partition)))
      .sort((a, b) => (a.date === b.date ? (a.partition < b.partition ? -1 : 1) : a.date < b.date ? 1 : -1));
    const out: DailyLog[] = [];
    for (const e of index) {
      if (out.length >= q.limit) break;
      const seqs = Array.from({ length: e.meta.seq }, (_, i) => i + 1);
      const counts = await this.o.store.dailyLineCounts(e.partition, e.date, seqs);
      const p = partitionOf(e.partition);
      for (const seq of seqs) {
        if (out.length >= q.limit) break;
        out.push({ ...p, date: e.date, operation_count: counts[seq - 1], path: `${scopeDir(p)}/daily/${e.date}.${seq}.md` });
      }
    }
    return out;
  }
}

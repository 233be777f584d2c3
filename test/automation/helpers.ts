import type { Client } from '../helpers/service.ts';

/** putJob writes an automation.job record (create, or update at `version`) and returns the record. */
export async function putRecord(api: Client, kind: string, id: string, scope: { kind: string; id?: string }, spec: Record<string, unknown>, version = 0) {
  const res = await api.put(`/api/resources/${kind}/${id}`, { scope, spec, expected_version: version });
  if (res.status !== 200 && res.status !== 201) throw new Error(`put ${kind} ${id}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.record;
}

/** runsOf lists a job's or trigger's runs, oldest first. */
export async function runsOf(api: Client, kind: 'jobs' | 'triggers', id: string): Promise<any[]> {
  const res = await api.get(`/api/automation/${kind}/${id}/history?limit=1000`);
  if (res.status !== 200) throw new Error(`history ${id}: ${res.status} ${JSON.stringify(res.body)}`);
  return [...res.body.runs].reverse();
}

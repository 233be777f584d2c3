import { expect } from 'chai';
import { RedisServer } from '../helpers/redis-server.ts';
import { ProcessCluster } from '../helpers/process.ts';
import { Client, eventually } from '../helpers/service.ts';

/** errorLines answers the service's warning and error lines about connections and workers, by message and error. */
function errorLines(stderr: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const line of stderr.split('\n')) {
    if (!line) continue;
    // NOTE: a BullMQ queue with no error listener prints its connection's errors raw, past the logger.
    expect(line, 'a line that is not a log line').to.match(/^\{/);
    const l = JSON.parse(line) as { level: number; msg?: string; err?: unknown };
    if (l.level < 40 || !/(worker|connection) error$/.test(l.msg ?? '')) continue;
    const key = `${l.msg} | ${typeof l.err === 'string' ? l.err : JSON.stringify(l.err)}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

describe('a Redis outage in the service log', function () {
  this.timeout(60_000);
  const cluster = new ProcessCluster('outage-logs').install();
  // NOTE: one Redis (this file is not among the cluster suites), stopped and started again on its port and data.
  const redis = cluster.redis as RedisServer;

  it('logs each connection and worker error once, not once per reconnect attempt, nothing past the logger, and the service recovers', async () => {
    const svc = await cluster.start();
    const api = new Client(svc.url);
    // NOTE: all of it from here (ServiceProcess keeps only a tail, which may begin mid-line).
    let stderr = '';
    svc.proc!.stderr!.on('data', (d) => { stderr += d; });
    await redis.stop('SIGKILL');
    // NOTE: every BullMQ worker and connection retries meanwhile (hundreds of attempts in 3 s without the limit).
    await new Promise((r) => setTimeout(r, 3_000));
    await redis.start();
    await eventually(async () => {
      expect((await api.post('/api/tasks', { scope: 'global', title: 'after the outage' })).status).to.equal(201);
    }, 30_000, 200);
    const counts = errorLines(stderr);
    expect(counts.size, stderr.slice(-2_000)).to.be.greaterThan(0);
    const repeated = [...counts].filter(([, n]) => n > 1);
    expect(repeated, 'the same error logged again within the window').to.deep.equal([]);
  });
});

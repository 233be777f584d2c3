import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { MemoryService } from '../../runtime/memory/memory-service.ts';
import { MemoryIndex, trigrams, unicodeWords, visiblePartitions } from '../../runtime/memory/search.ts';
import { Keys } from '../../store/keys.ts';
import { MemoryStore } from '../../store/memory-store.ts';
import { RedisServer } from '../helpers/redis-server.ts';

const CORPUS: [string, string][] = [
  ['deploy cadence', 'Production deploys happen every Tuesday after the release review.'],
  ['deploy freeze', 'No deploys during the December freeze; hotfixes need two approvals.'],
  ['database', 'The primary database is PostgreSQL 16 with logical replication to the analytics replica.'],
  ['code review', 'Reviews need one approval from an owner of the touched package.'],
  ['release notes', 'Release notes are drafted from merged pull request titles.'],
  ['kubernetes', 'Workloads run on Kubernetes; each namespace belongs to one team.'],
];

describe('Recall ranking (MiniSearch BM25+ on unicode words and trigrams, fused; real Redis)', function () {
  this.timeout(30_000);
  const redis = new RedisServer();
  let conn: Redis;
  let index: MemoryIndex;
  const now = Date.parse('2026-03-01T12:00:00Z');
  const global = visiblePartitions({});

  before(async () => {
    await redis.start();
    conn = redis.client();
    const store = new MemoryStore(conn, new Keys('svc:'));
    const svc = new MemoryService({ store, now: () => new Date(now), policy: { maxWritesPerMin: 1000 } });
    for (const [name, content] of CORPUS) {
      const r = await svc.write({ scope: 'global', type: 'reference', name, content }, { origin: 'http' });
      expect(r.decision.op, name).to.equal('add');
    }
    index = new MemoryIndex({ store, now: () => now });
    await index.start();
  });
  after(async () => {
    await index.stop();
    conn.disconnect();
    await redis.destroy();
  });

  it('tokenizes by unicode words and by character trigrams', () => {
    expect(unicodeWords('Café-au-lait, 3 naïve')).to.deep.equal(['Café', 'au', 'lait', '3', 'naïve']);
    expect(trigrams('Deploys go')).to.deep.equal(['dep', 'epl', 'plo', 'loy', 'oys', 'go']);
  });

  it('ranks a fixed corpus in the expected order ', () => {
    const order = (q: string) => index.search({ text: q, visible: global, topK: 5, rawCandidates: 50 }).map((h) => h.filename);
    // NOTE: both deploy memories hold "deploy" in their name and "deploys" in their body; the shorter body ranks first
    // (BM25's length normalization). The database memory is a trigram-only match ("replication" shares "epl" with
    // "deploy"), so it comes last.
    expect(order('deploy')).to.deep.equal(['reference_deploy_cadence.md', 'reference_deploy_freeze.md', 'reference_database.md']);
    // two query words in one body beat one word in a name; "approvals" reaches "approval" through trigrams
    expect(order('release review approvals').slice(0, 3)).to.deep.equal(['reference_deploy_cadence.md', 'reference_code_review.md', 'reference_release_notes.md']);
    expect(order('postgres replication')[0]).to.equal('reference_database.md');
  });

  it('matches inflections and typos through trigrams where words alone miss', () => {
    const hits = index.search({ text: 'kubernets namespaces', visible: global, topK: 5, rawCandidates: 50 });
    expect(hits[0].filename).to.equal('reference_kubernetes.md');
    expect(hits[0].explain.bm25_trigram).to.equal(1);
  });

  it('explains each score as 0.55 unicode + 0.20 trigram + 0.15 recency + 0.10 recall signal', () => {
    const [h] = index.search({ text: 'database', visible: global, topK: 1, rawCandidates: 50 });
    const e = h.explain;
    expect(e.recency).to.equal(1);
    expect(h.score).to.be.closeTo(0.55 * e.bm25_unicode + 0.2 * e.bm25_trigram + 0.15 * e.recency + 0.1 * e.recall_signal, 1e-9);
    const later = new MemoryIndex({ store: new MemoryStore(conn, new Keys('svc:')), now: () => now + 14 * 86_400_000 });
    return later.rebuild().then(() => {
      const [old] = later.search({ text: 'database', visible: global, topK: 1, rawCandidates: 50 });
      expect(old.explain.recency).to.be.closeTo(0.5, 1e-9);
    });
  });

  it('expands a query word to the vocabulary words sharing its trigrams, weighted by their similarity', () => {
    const [h] = index.search({ text: 'approvals', visible: global, topK: 1, rawCandidates: 50 });
    // "approvals" is in one body; "approval" (another body) is reached through trigrams only, with a lower weight
    expect(h.filename).to.equal('reference_deploy_freeze.md');
    const both = index.search({ text: 'approvals', visible: global, topK: 5, rawCandidates: 50 });
    const review = both.find((x) => x.filename === 'reference_code_review.md')!;
    expect(review.explain.raw_unicode).to.equal(0);
    expect(review.explain.bm25_trigram).to.be.greaterThan(0).and.lessThan(1);
  });

  it('answers a repeated query from its cache until the index changes', async () => {
    const q = { text: 'kubernetes namespace', visible: global, topK: 5, rawCandidates: 50 };
    const first = index.search(q);
    expect(index.search(q)).to.deep.equal(first);
    const store = new MemoryStore(conn, new Keys('svc:'));
    const svc = new MemoryService({ store, now: () => new Date(now), policy: { maxWritesPerMin: 1000 } });
    const r = await svc.write({ scope: 'global', type: 'reference', name: 'namespaces', content: 'Each Kubernetes namespace has a quota.' }, { origin: 'http' });
    await index.refresh([`g/${r.decision.target_filename}`]);
    expect(index.search(q).map((h) => h.filename)).to.include('reference_namespaces.md');
    await svc.write({ scope: 'global', type: 'reference', name: 'namespaces', content: 'x', metadata: { operation: 'delete' } }, { origin: 'http' });
    await index.refresh([`g/${r.decision.target_filename}`]);
    expect(index.search(q).map((h) => h.filename)).to.deep.equal(first.map((h) => h.filename));
  });

  it('expands a query word again once a new vocabulary word may be similar to it', async () => {
    const q = { text: 'kubernets', visible: global, topK: 10, rawCandidates: 50 };
    expect(index.search(q).map((h) => h.filename)).to.not.include('reference_kubernetz.md');
    const store = new MemoryStore(conn, new Keys('svc:'));
    const svc = new MemoryService({ store, now: () => new Date(now), policy: { maxWritesPerMin: 1000 } });
    const r = await svc.write({ scope: 'global', type: 'reference', name: 'kubernetz', content: 'Kubernetz is the German cluster.' }, { origin: 'http' });
    await index.refresh([`g/${r.decision.target_filename}`]);
    const hit = index.search(q).find((h) => h.filename === 'reference_kubernetz.md');
    expect(hit?.explain.raw_unicode).to.equal(0);
    expect(hit?.explain.bm25_trigram).to.be.greaterThan(0);
    await svc.write({ scope: 'global', type: 'reference', name: 'kubernetz', content: 'x', metadata: { operation: 'delete' } }, { origin: 'http' });
    await index.refresh([`g/${r.decision.target_filename}`]);
  });

  it('sees only visible partitions, and leaves out already surfaced memories unless asked', () => {
    expect(index.search({ text: 'deploy', visible: visiblePartitions({ scope: 'workspace', workspace_id: 'w' }), topK: 5, rawCandidates: 50 })).to.deep.equal([]);
    const left = index.search({ text: 'deploy', visible: global, topK: 5, rawCandidates: 50, alreadySurfaced: ['reference_deploy_cadence.md'] }).map((h) => h.filename);
    expect(left).to.deep.equal(['reference_deploy_freeze.md', 'reference_database.md']);
  });
});

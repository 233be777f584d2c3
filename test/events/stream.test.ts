import { expect } from 'chai';
import type { Redis } from 'ioredis';
import type { EventSourceMessage } from 'eventsource-parser';
import { EVENT_STREAM_CONNECTION } from '../../runtime/events/bus-stream.ts';
import type { BusEventInput, EventBus } from '../../store/event-bus.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { SseReader } from '../helpers/sse.ts';

/** ids are the frames' ids, in order. */
const ids = (frames: EventSourceMessage[]) => frames.map((m) => m.id);

/** settle waits long enough for a frame that should not come to have arrived. */
const settle = () => new Promise((r) => setTimeout(r, 300));

describe('event bus stream (GET /api/events/stream, real Redis and HTTP)', function () {
  this.timeout(60_000);
  const f = new ServiceFixture({ workspace: false }).install();
  let bus: EventBus;
  let redis: Redis;
  const streams: SseReader[] = [];
  const open = async (query: string, headers: Record<string, string> = {}) => {
    const s = await new SseReader(`${f.service.url}/api/events/stream${query}`, headers).open();
    streams.push(s);
    return s;
  };
  const publish = (...inputs: BusEventInput[]) => bus.publishMany(inputs);
  const ev = (type: string, workspace_id?: string): BusEventInput => ({ type, source: 'test', workspace_id, data: { n: type } });

  beforeEach(() => {
    bus = f.service.bus!;
    redis = f.redis.client();
  });
  afterEach(async () => {
    for (const s of streams.splice(0)) s.close();
    await redis.quit();
  });

  it('sends each event matching a type pattern once, with its bus id, type and the event as data', async () => {
    const s = await open('?type=probe.*&type=other.exact');
    expect(s.status).to.equal(200);
    const sent = await publish(ev('probe.a'), ev('noise.x'), ev('other.exact'), ev('probe.b.c'), ev('other.exact_not'), ev('probex.y'));
    const frames = await s.until(3);
    await settle();
    expect(ids(s.events)).to.deep.equal([sent[0].id, sent[2].id, sent[3].id]);
    expect(frames.map((m) => m.event)).to.deep.equal(['probe.a', 'other.exact', 'probe.b.c']);
    expect(JSON.parse(frames[0].data)).to.deep.equal(sent[0]);
  });

  it('resumes after Last-Event-ID (or ?since=) with nothing lost and nothing twice, then tails live events', async () => {
    const first = await open('?type=probe.*');
    const [a, , b] = await publish(ev('probe.1'), ev('noise.1'), ev('probe.2'));
    expect(ids(await first.until(2))).to.deep.equal([a.id, b.id]);
    first.close();
    // NOTE: published while no stream is open; the resumed stream must replay exactly these.
    const [c, , d] = await publish(ev('probe.3'), ev('noise.2'), ev('probe.4'));
    const resumed = await open('?type=probe.*', { 'Last-Event-ID': a.id });
    expect(ids(await resumed.until(3))).to.deep.equal([b.id, c.id, d.id]);
    const [e] = await publish(ev('probe.5'));
    await resumed.until(4);
    await settle();
    expect(ids(resumed.events)).to.deep.equal([b.id, c.id, d.id, e.id]);
    const since = await open(`?type=probe.*&since=${c.id}`);
    await since.until(2);
    await settle();
    expect(ids(since.events)).to.deep.equal([d.id, e.id]);
  });

  it('without a resume point starts at the newest event: only what is published after it opened is sent', async () => {
    await publish(ev('probe.old'));
    const s = await open('?type=probe.*');
    const [fresh] = await publish(ev('probe.new'));
    await s.until(1);
    await settle();
    expect(ids(s.events)).to.deep.equal([fresh.id]);
  });

  it('filters by workspace_id: global events and other workspaces are left out', async () => {
    const s = await open('?type=probe.*&workspace_id=ws-a');
    const sent = await publish(ev('probe.1', 'ws-a'), ev('probe.2', 'ws-b'), ev('probe.3'), ev('probe.4', 'ws-a'));
    await s.until(2);
    await settle();
    expect(ids(s.events)).to.deep.equal([sent[0].id, sent[3].id]);
  });

  it('refuses a bad type pattern with 422 naming it, a malformed resume id with 400, and opens no stream', async () => {
    const table = [
      { reason: 'a star without its dot is not a prefix pattern', query: '?type=task*', status: 422 },
      { reason: 'a bare star is not a pattern (omit type for every event)', query: '?type=*', status: 422 },
      { reason: 'only one trailing .* is allowed', query: '?type=task.*.*', status: 422 },
      { reason: 'event types are lower case', query: '?type=Task.Created', status: 422 },
      { reason: 'an empty pattern names nothing', query: '?type=', status: 422 },
      { reason: 'one bad pattern among good ones refuses the stream', query: '?type=task.*&type=task run', status: 422 },
      { reason: 'since must be a bus id', query: '?since=12', status: 400 },
    ];
    for (const t of table) {
      const res = await f.api.get(`/api/events/stream${t.query}`);
      expect(res.status, t.reason).to.equal(t.status);
      expect(res.headers.get('content-type'), t.reason).to.match(/json/);
      if (t.status === 422) expect(JSON.stringify(res.body), t.reason).to.include('type');
    }
    const header = await f.api.call('GET', '/api/events/stream', undefined, { 'Last-Event-ID': 'abc' });
    expect(header.status).to.equal(400);
    expect(header.body.diagnostic?.code ?? header.body.error?.code).to.equal('invalid_last_event_id');
  });

  it('a resume point the bus no longer holds gets one expired frame carrying the newest id, then live events', async () => {
    const [a, b, c] = await publish(ev('probe.1'), ev('probe.2'), ev('probe.3'));
    // NOTE: what the retention cap does on a busy bus, made to happen now: every entry but the newest is dropped.
    await redis.xtrim(bus.key, 'MAXLEN', 1);
    const s = await open('?type=probe.*', { 'Last-Event-ID': a.id });
    const [expired] = await s.until(1);
    expect(expired.event).to.equal('expired');
    expect(expired.id).to.equal(c.id);
    expect(JSON.parse(expired.data)).to.include({ type: 'expired', last_event_id: a.id, resumed_after: c.id });
    const [d] = await publish(ev('probe.4'));
    await s.until(2);
    await settle();
    expect(ids(s.events)).to.deep.equal([c.id, d.id]);
    expect(ids(s.events)).to.not.include(b.id);
    const ahead = await open('?type=probe.*', { 'Last-Event-ID': '99999999999999-0' });
    expect((await ahead.until(1))[0]).to.include({ event: 'expired', id: d.id });
  });

  it('holds one Redis connection per open stream and releases it when the client leaves', async () => {
    const readers = async () => ((await redis.client('LIST')) as string).split('\n').filter((l) => l.includes(` name=${EVENT_STREAM_CONNECTION} `)).length;
    expect(await readers()).to.equal(0);
    const one = await open('?type=probe.*');
    const two = await open('');
    await publish(ev('probe.1'));
    await Promise.all([one.until(1), two.until(1)]);
    expect(await readers()).to.equal(2);
    one.close();
    two.close();
    await eventually(async () => expect(await readers()).to.equal(0), 5000);
    // NOTE: the service still serves: a new stream opens and gets what follows.
    const three = await open('?type=probe.*');
    const [x] = await publish(ev('probe.2'));
    expect(ids(await three.until(1))).to.deep.equal([x.id]);
  });
});

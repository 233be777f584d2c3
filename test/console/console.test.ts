import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { expect } from 'chai';
import type { Page } from 'puppeteer-core';
import { sha256 } from '../../runtime/process/auth.ts';
import { KINDS } from '../../codecs/index.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { EverythingHttp, everythingStdio } from '../interop/everything.ts';
import { Chromium, needBrowser, shot, texts } from './browser.ts';

const WAIT = { timeout: 30_000 };

describe('Web console (real chromium against a real service)', function () {
  const f = new ServiceFixture().install();
  const chromium = new Chromium();
  let errors: string[] = [];
  let page: Page;

  before(async function () {
    needBrowser(this);
    await chromium.launch();
  });
  after(() => chromium.close());
  beforeEach(async () => {
    errors = [];
    page = await chromium.page(errors);
  });
  afterEach(async () => {
    await page?.close();
    expect(errors, 'errors on the page').to.deep.equal([]);
  });

  const url = (p: string) => f.service.url + p;
  const replaceText = async (selector: string, text: string) => {
    await page.$eval(selector, (el) => { (el as HTMLTextAreaElement).value = ''; });
    await page.type(selector, text);
  };

  it('is served at / (HTML, hashed assets cached for good, client routes get index.html) and leaves the API, probes and metrics alone', async () => {
    const index = await fetch(url('/'));
    expect(index.status).to.equal(200);
    expect(index.headers.get('content-type')).to.equal('text/html; charset=utf-8');
    expect(index.headers.get('cache-control')).to.equal('no-cache');
    expect(index.headers.get('content-security-policy')).to.include("default-src 'self'");
    const html = await index.text();
    const asset = /src="(\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(asset).to.be.a('string');
    const js = await fetch(url(asset!));
    expect(js.headers.get('content-type')).to.equal('text/javascript; charset=utf-8');
    expect(js.headers.get('cache-control')).to.equal('public, max-age=31536000, immutable');
    // Every client route gets index.html, whatever its last segment looks like (kinds and ids have dots).
    for (const p of ['/resources/agent/some-id', '/resources/automation.job', '/resources/hook.binding/w1.x', '/resources/tool/x.js', '/sessions']) {
      const route = await fetch(url(p));
      expect(route.status, p).to.equal(200);
      expect(route.headers.get('content-type'), p).to.equal('text/html; charset=utf-8');
      expect(await route.text(), p).to.equal(html);
    }
    const head = await fetch(url('/'), { method: 'HEAD' });
    expect(head.status).to.equal(200);
    expect(Number(head.headers.get('content-length'))).to.equal(Buffer.byteLength(html));
    expect(await head.text()).to.equal('');
    // NOTE: node:http, since fetch adds `Cache-Control: no-cache` to a conditional request (the Fetch standard).
    const again = await new Promise<number>((resolve, reject) => {
      http.get(url('/'), { headers: { 'if-modified-since': index.headers.get('last-modified')! } }, (res) => { res.resume(); resolve(res.statusCode!); }).on('error', reject);
    });
    expect(again).to.equal(304);
    // What it must not answer: the API's own paths, other methods, files it does not have, paths out of its folder.
    const api404 = await fetch(url('/api/nothing-here'));
    expect(api404.status).to.equal(404);
    expect((await api404.json()).diagnostic.code).to.be.a('string');
    expect((await fetch(url('/healthz'))).headers.get('content-type')).to.not.include('text/html');
    expect(await (await fetch(url('/metrics'))).text()).to.include('svc_http_requests_total');
    expect((await fetch(url('/api/resources'))).headers.get('content-type')).to.include('application/json');
    // A hashed asset that is not there (a stale page's old build) is the API's 404, not HTML.
    const stale = await fetch(url('/assets/index-00000000.js'));
    expect(stale.status).to.equal(404);
    expect(stale.headers.get('content-type')).to.include('application/json');
    // NOTE: node:http with a raw path, since URL parsing resolves the dot segments; the service must not leave its folder.
    const outside = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const { hostname, port } = new URL(f.service.url);
      http.get({ hostname, port, path: '/assets/%2e%2e/%2e%2e/%2e%2e/package.json' }, (res) => {
        let body = '';
        res.on('data', (d) => { body += d; });
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      }).on('error', reject);
    });
    expect(outside.body).to.not.include('"dependencies"');
    const post = await fetch(url('/'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(post.headers.get('content-type')).to.not.include('text/html');
  });

  it("loads every kind's page, and a record whose id has a dot, directly and on reload", async () => {
    await f.api.put('/api/resources/agent/w1.x?wait=true', { scope: { kind: 'global' }, spec: { name: 'w1.x', prompt: 'Dotted.' }, expected_version: 0 });
    // NOTE: the kinds come from the codecs, so a kind added there and forgotten in the console fails here.
    for (const kind of KINDS) {
      await page.goto(url(`/resources/${kind}`));
      await page.waitForSelector('table.records[data-loaded="true"]', WAIT);
      expect((await texts(page, 'nav.kinds a.active')), kind).to.deep.equal([kind]);
      await page.reload();
      await page.waitForSelector('table.records[data-loaded="true"]', WAIT);
      expect((await texts(page, 'main h1'))[0], kind).to.match(new RegExp(`^${kind.replace('.', '\\.')} `));
    }
    for (const load of [() => page.goto(url('/resources/agent/w1.x')), () => page.reload()]) {
      await load();
      await page.waitForSelector('pre.yaml', WAIT);
      expect((await texts(page, 'pre.yaml'))[0]).to.include('prompt: Dotted.');
      await page.waitForSelector('h1 .badge-Ready', WAIT);
      expect((await texts(page, 'main h1'))[0]).to.match(/^agent\/w1\.x Ready/);
    }
  });

  it('creates a record through the UI and shows it Ready with its conditions and YAML', async () => {
    await page.goto(url('/resources/agent'));
    await page.waitForSelector('table.records[data-loaded="true"]', WAIT);
    await page.type('form.create input[name=id]', 'reviewer');
    await replaceText('form.create textarea[name=spec]', 'name: reviewer\nprompt: Review diffs.\n');
    await page.click('form.create button[type=submit]');
    await page.waitForSelector('tr[data-id="reviewer"][data-health="Ready"]', WAIT);
    expect(await texts(page, 'tr[data-id="reviewer"] li.cond-Ready')).to.have.length(1);
    expect((await texts(page, '.create-result'))[0]).to.match(/^created agent\/reviewer \(version 1, reconcile done\)/);
    const rec = await f.api.get('/api/resources/agent/reviewer');
    expect(rec.body.record.spec.prompt).to.equal('Review diffs.');
    expect(rec.body.record.version).to.equal(1);
    await shot(page, 'resources');
    await page.click('tr[data-id="reviewer"] a');
    await page.waitForSelector('pre.yaml', WAIT);
    expect((await texts(page, 'pre.yaml'))[0]).to.include('prompt: Review diffs.');
  });

  it('shows a Degraded record first, with its reason and message, as it arrives on the watch stream', async () => {
    const put = (id: string, spec: unknown) => f.api.put(`/api/resources/mcp_server/${id}?wait=true`, { scope: { kind: 'global' }, spec, expected_version: 0 });
    await page.goto(url('/resources/mcp_server'));
    await page.waitForSelector('table.records[data-loaded="true"]', WAIT);
    expect(await texts(page, 'tr[data-id]')).to.deep.equal([]);
    // NOTE: created after the page listed the kind: only the watch stream can bring it.
    expect((await put('zz-missing', { name: 'zz-missing', command: '/nonexistent/mcp-server' })).status).to.equal(201);
    await page.waitForSelector('tr[data-id="zz-missing"][data-health="Degraded"]', WAIT);
    const row = (await texts(page, 'tr[data-id="zz-missing"]'))[0];
    expect(row).to.include('backend_not_executable');
    const status = (await f.api.get('/api/resources/mcp_server/zz-missing/status')).body.status;
    const degraded = status.conditions.find((c: { type: string }) => c.type === 'Degraded');
    expect(row).to.include(degraded.message);
    // A Ready server sorts after the Degraded one (though its id sorts first); a record of another kind never shows.
    expect((await put('aa-ok', everythingStdio('aa-ok'))).status).to.equal(201);
    await f.api.put('/api/resources/agent/ab-agent', { scope: { kind: 'global' }, spec: { name: 'ab-agent', prompt: 'p' }, expected_version: 0 });
    await page.waitForSelector('tr[data-id="aa-ok"][data-health="Ready"]', WAIT);
    expect(await page.$$eval('tr[data-id]', (rows) => rows.map((r) => r.getAttribute('data-id')))).to.deep.equal(['zz-missing', 'aa-ok']);
    expect((await texts(page, 'tr[data-id="aa-ok"]'))[0]).to.not.include('backend_not_executable');
    expect(await page.$eval('tr[data-id="zz-missing"] li', (li) => li.getAttribute('data-type'))).to.equal('Degraded');
    await shot(page, 'degraded');
  });

  it('a status change no edit caused (a controller retry that finds its server up) reaches the open pages', async () => {
    const server = await new EverythingHttp().reservePort();
    try {
      const put = await f.api.put('/api/resources/mcp_server/later?wait=true', { scope: { kind: 'global' }, spec: { name: 'later', transport: 'http', url: server.url }, expected_version: 0 });
      expect(put.status).to.equal(201);
      await page.goto(url('/resources/mcp_server'));
      await page.waitForSelector('tr[data-id="later"][data-health="Degraded"]', WAIT);
      expect((await texts(page, 'tr[data-id="later"]'))[0]).to.include('mcp_unreachable');
      const record = await chromium.page(errors);
      try {
        await record.goto(url('/resources/mcp_server/later'));
        await record.waitForSelector('h1 .badge-Degraded', WAIT);
        // The server comes up: only the controller's requeue notices; the record is not edited.
        await server.start();
        await page.waitForSelector('tr[data-id="later"][data-health="Ready"]', WAIT);
        await record.waitForSelector('h1 .badge-Ready', WAIT);
        expect((await texts(page, 'tr[data-id="later"]'))[0]).to.not.include('mcp_unreachable');
        expect(await record.$eval('ul.conditions', (el) => el.textContent)).to.include('Connected=True');
        await shot(record, 'status-watch');
      } finally {
        await record.close();
      }
      expect((await f.api.get('/api/resources/mcp_server/later')).body.record.version).to.equal(1);
      expect((await f.api.get('/api/resources/mcp_server/later/history')).body.history).to.have.length(1);
    } finally {
      await server.stop();
    }
  });

  it("shows a session's events live while a prompt runs", async () => {
    const s = (await f.api.post('/api/sessions', { workspace: f.ws.id })).body.session;
    await page.goto(url(`/sessions/${f.ws.id}/${s.id}`));
    await page.waitForSelector('.stream-state', WAIT);
    await page.waitForFunction(() => document.querySelector('.stream-state')?.textContent === 'stream open', WAIT);
    await page.type('form.prompt textarea', 'hello from the console\n/sleep 60000');
    await page.click('form.prompt button[type=submit]');
    // The turn is still running (it sleeps): what shows came over the live stream, not from a reload.
    await page.waitForFunction(() => [...document.querySelectorAll('.event .text')].some((e) => e.textContent === 'hello from the console'), WAIT);
    const types = await page.$$eval('.event', (els) => els.map((e) => e.getAttribute('data-type')));
    expect(types).to.include('agent_message');
    expect((await f.api.get(`/api/sessions/${s.id}`)).body.session.badge).to.equal('running');
    await page.waitForFunction(() => document.querySelector('h1 .badge')?.textContent === 'running', WAIT);
    await shot(page, 'session-live');
    const before = types.length;
    await f.api.post(`/api/sessions/${s.id}/prompt/cancel`, {});
    await page.waitForFunction((n) => document.querySelectorAll('.event').length > n, WAIT, before);
    // NOTE: the cancel's events come on two paths (the marker at once, the turn's done once the agent answers).
    const all = await eventually(async () => {
      const res = await f.api.get(`/api/sessions/${s.id}/events`);
      expect(res.body.events.map((e: { type: string }) => e.type)).to.include('done');
      return res;
    });
    await eventually(async () => expect(await page.$$eval('.event', (els) => els.length)).to.equal(all.body.events.length));
    const seqs = await page.$$eval('.event', (els) => els.map((e) => Number(e.getAttribute('data-seq'))));
    expect(seqs).to.deep.equal(all.body.events.map((e: { sequence: number }) => e.sequence));
  });

  it('approving a permission request from the UI resumes the turn (and nothing is approved before the click)', async () => {
    const s = (await f.api.post('/api/sessions', { workspace: f.ws.id })).body.session;
    await page.goto(url(`/sessions/${f.ws.id}/${s.id}`));
    await page.waitForFunction(() => document.querySelector('.stream-state')?.textContent === 'stream open', WAIT);
    await page.type('form.prompt textarea', '/permission deploy production');
    await page.click('form.prompt button[type=submit]');
    await page.waitForSelector('.approval button.approve', WAIT);
    await page.waitForFunction(() => document.querySelector('h1 .badge')?.textContent === 'running', WAIT);
    expect((await texts(page, '.approval b'))[0]).to.equal('deploy production');
    const waiting = (await f.api.get(`/api/sessions/${s.id}/events?type=permission`)).body.events;
    expect(waiting.map((e: { content: { action: string } }) => e.content.action)).to.deep.equal(['request']);
    await shot(page, 'session-approval');
    await page.click('.approval button.approve');
    await page.waitForFunction(() => [...document.querySelectorAll('.event .text')].some((e) => e.textContent === 'permission granted'), WAIT);
    await page.waitForFunction(() => !document.querySelector('.approval'), WAIT);
    const perms = (await f.api.get(`/api/sessions/${s.id}/events?type=permission`)).body.events;
    expect(perms.map((e: { content: { action: string } }) => e.content.action)).to.have.length(2);
    expect(JSON.stringify(perms.at(-1).content)).to.include('allow');
    const messages = (await f.api.get(`/api/sessions/${s.id}/events?type=agent_message`)).body.events.map((e: { content: { text: string } }) => e.content.text);
    expect(messages).to.deep.equal(['permission granted']);
  });

  it("shows an error event's text, lists sessions newest first, and offers no workspace whose root is gone", async () => {
    const s1 = (await f.api.post('/api/sessions', { workspace: f.ws.id })).body.session;
    await page.goto(url(`/sessions/${f.ws.id}/${s1.id}`));
    await page.waitForFunction(() => document.querySelector('.stream-state')?.textContent === 'stream open', WAIT);
    await page.type('form.prompt textarea', '/error the model quota is used up');
    await page.click('form.prompt button[type=submit]');
    await page.waitForSelector('.event[data-type="error"]', WAIT);
    expect(await texts(page, '.event[data-type="error"] .text')).to.deep.equal(['the model quota is used up']);
    await shot(page, 'session-error');

    const s2 = (await f.api.post('/api/sessions', { workspace: f.ws.id })).body.session;
    const s3 = (await f.api.post('/api/sessions', { workspace: f.ws.id })).body.session;
    mkdirSync(path.join(f.root, 'gone'));
    const gone = (await f.api.post('/api/workspaces', { root_dir: path.join(f.root, 'gone'), name: 'gone' })).body.workspace;
    rmSync(path.join(f.root, 'gone'), { recursive: true });
    await page.goto(url('/sessions'));
    await page.waitForSelector(`tr[data-id="${s1.id}"]`, WAIT);
    expect(await page.$$eval('table.sessions tr[data-id]', (rows) => rows.map((r) => r.getAttribute('data-id')))).to.deep.equal([s3.id, s2.id, s1.id]);
    expect(await page.$$eval('select[name=workspace] option', (os) => os.map((o) => (o as HTMLOptionElement).value))).to.deep.equal([f.ws.id]);
    await page.goto(url('/workspaces'));
    await page.waitForSelector(`tr[data-id="${gone.id}"] .root-gone`, WAIT);
    expect(await page.$(`tr[data-id="${f.ws.id}"] .root-gone`)).to.equal(null);
  });

  it('tasks: who holds which lease, a task\'s runs, and cancel from the task page', async () => {
    const t = (await f.api.post('/api/tasks', { scope: 'workspace', workspace: f.ws.id, title: 'triage the inbox' })).body.task;
    const idle = (await f.api.post('/api/tasks', { scope: 'workspace', workspace: f.ws.id, title: 'later' })).body.task;
    const run = (await f.api.post(`/api/tasks/${t.id}/start`, {})).body.run;
    expect((await f.api.post(`/api/task-runs/${run.id}/claim`, {})).status).to.equal(200);
    for (const load of [() => page.goto(url('/tasks')), () => page.reload()]) {
      await load();
      await page.waitForSelector('table.tasks[data-loaded="true"]', WAIT);
      expect(await page.$$eval('table.tasks tr[data-id]', (rows) => rows.map((r) => r.getAttribute('data-id')))).to.have.members([t.id, idle.id]);
      expect(await page.$$eval('table.runs tr[data-id]', (rows) => rows.map((r) => r.getAttribute('data-id')))).to.deep.equal([run.id]);
      expect((await texts(page, `table.runs tr[data-id="${run.id}"] .holder`))[0]).to.equal('human/anonymous');
    }
    await shot(page, 'tasks');
    page.on('dialog', (d) => void d.accept());
    await page.goto(url(`/tasks/${t.id}`));
    await page.waitForSelector(`table.runs tr[data-id="${run.id}"][data-status="claimed"]`, WAIT);
    await page.click('button.cancel');
    await page.waitForFunction(() => document.querySelector('.task-status')?.textContent === 'canceled', WAIT);
    await page.waitForSelector(`table.runs tr[data-id="${run.id}"][data-status="canceled"]`, WAIT);
    expect((await f.api.get(`/api/tasks/${t.id}`)).body.task.status).to.equal('canceled');
    expect((await f.api.get(`/api/tasks/${idle.id}`)).body.task.status).to.equal('ready');
  });

  it('automation: each job with its next fire time, and Run now starts a run that the runs table shows', async () => {
    const put = await f.api.put('/api/resources/automation.job/standup?wait=true', {
      scope: { kind: 'workspace', id: f.ws.id }, expected_version: 0,
      spec: { name: 'standup', agent_name: 'scripted', prompt: 'what changed?', enabled: true, schedule: { mode: 'cron', expr: '0 9 * * 1-5' } },
    });
    expect(put.status).to.equal(201);
    const job = (await f.api.get('/api/automation/jobs/standup')).body.job;
    expect(job.next_fire_at).to.be.a('string');
    await page.goto(url('/automation'));
    await page.waitForSelector('table.jobs tr[data-id="standup"]', WAIT);
    expect((await texts(page, 'tr[data-id="standup"] .next-fire'))[0]).to.equal(job.next_fire_at);
    expect(await page.$$('table.auto-runs tr[data-id]')).to.have.length(0);
    await page.click('tr[data-id="standup"] button.run-now');
    await page.waitForSelector('table.auto-runs tr[data-id]', WAIT);
    const runs = (await f.api.get('/api/automation/runs?job=standup')).body.runs;
    expect(runs).to.have.length(1);
    expect(await page.$$eval('table.auto-runs tr[data-id]', (rows) => rows.map((r) => r.getAttribute('data-id')))).to.deep.equal([runs[0].id]);
    // It finishes without the page: Reload shows it succeeded.
    await eventually(async () => expect((await f.api.get(`/api/automation/runs/${runs[0].id}`)).body.run.status).to.equal('succeeded'));
    await page.click('button.reload');
    await page.waitForSelector(`table.auto-runs tr[data-id="${runs[0].id}"][data-status="succeeded"]`, WAIT);
    await shot(page, 'automation');
  });

  it('notification deliveries: each with its preset, bridge, status and attempts', async () => {
    const received: string[] = [];
    const receiver = http.createServer((req, res) => { received.push(String(req.headers['x-svc-event-type'])); res.writeHead(req.method === 'HEAD' ? 200 : 204).end(); });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    try {
      const hook = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
      expect((await f.api.put('/api/resources/bridge.instance/ops?wait=true', { scope: { kind: 'global' }, expected_version: 0, spec: { platform: 'webhook', extension_name: 'webhook', display_name: 'Ops', enabled: true, provider_config: { url: hook } } })).status).to.equal(201);
      expect((await f.api.post('/api/notifications/presets', { name: 'agents', enabled: true, events: ['resource.applied'], targets: [{ bridge_id: 'ops' }] })).status).to.equal(201);
      await f.api.put('/api/resources/agent/notified', { scope: { kind: 'global' }, spec: { name: 'notified', prompt: 'p' }, expected_version: 0 });
      const delivered = await eventually(async () => {
        const d = (await f.api.get('/api/notifications/deliveries?preset=agents&status=delivered')).body.deliveries;
        expect(d).to.have.length.at.least(1);
        return d;
      }, 30_000);
      await page.goto(url('/notifications'));
      await page.waitForSelector(`table.deliveries tr[data-id="${delivered[0].id}"][data-status="delivered"]`, WAIT);
      const row = (await texts(page, `table.deliveries tr[data-id="${delivered[0].id}"]`))[0];
      expect(row).to.include('resource.applied').and.include('agents').and.include('ops');
      await shot(page, 'deliveries');
    } finally {
      await new Promise((r) => receiver.close(r));
    }
  });

  /**
   * openLive opens a work page and waits until its bus stream is open (the service has fixed where it reads from,
   * so every later event reaches it), and marks the window, so `sameWindow` can tell the page was never reloaded.
   */
  const openLive = async (p: string, loaded: string) => {
    await page.goto(url(p));
    await page.waitForSelector(loaded, WAIT);
    await page.waitForSelector('[data-live="open"]', WAIT);
    await page.evaluate(() => { (window as unknown as { unreloaded: boolean }).unreloaded = true; });
  };
  const sameWindow = () => page.evaluate(() => (window as unknown as { unreloaded?: boolean }).unreloaded === true);

  it('the tasks page follows the event bus: a task created, started and claimed through the API shows up with its lease, no reload', async () => {
    await openLive('/tasks', 'table.tasks[data-loaded="true"]');
    expect(await page.$$('table.tasks tr[data-id]')).to.have.length(0);
    const t = (await f.api.post('/api/tasks', { scope: 'workspace', workspace: f.ws.id, title: 'made elsewhere' })).body.task;
    await page.waitForSelector(`table.tasks tr[data-id="${t.id}"]`, WAIT);
    const run = (await f.api.post(`/api/tasks/${t.id}/start`, {})).body.run;
    expect((await f.api.post(`/api/task-runs/${run.id}/claim`, {})).status).to.equal(200);
    await page.waitForSelector(`table.runs tr[data-id="${run.id}"][data-status="claimed"]`, WAIT);
    expect((await texts(page, `table.runs tr[data-id="${run.id}"] .holder`))[0]).to.equal('human/anonymous');
    expect(await sameWindow(), 'the page was not reloaded').to.equal(true);
  });

  it('the automation page follows the event bus: a job fired through the API shows its new run until it succeeds, no reload', async () => {
    const put = await f.api.put('/api/resources/automation.job/elsewhere?wait=true', {
      scope: { kind: 'workspace', id: f.ws.id }, expected_version: 0,
      spec: { name: 'elsewhere', agent_name: 'scripted', prompt: 'fired from a curl', enabled: true, schedule: { mode: 'cron', expr: '0 9 * * 1-5' } },
    });
    expect(put.status).to.equal(201);
    await openLive('/automation', 'table.jobs tr[data-id="elsewhere"]');
    expect(await page.$$('table.auto-runs tr[data-id]')).to.have.length(0);
    const fired = await f.api.post('/api/automation/jobs/elsewhere/trigger', {});
    expect(fired.status).to.equal(202);
    await page.waitForSelector(`table.auto-runs tr[data-id="${fired.body.run.id}"]`, WAIT);
    await page.waitForSelector(`table.auto-runs tr[data-id="${fired.body.run.id}"][data-status="succeeded"]`, WAIT);
    expect(await sameWindow(), 'the page was not reloaded').to.equal(true);
  });

  it('the deliveries page follows the event bus: a delivery appears and turns delivered, no reload', async () => {
    const receiver = http.createServer((_req, res) => res.writeHead(204).end());
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    try {
      const hook = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
      expect((await f.api.put('/api/resources/bridge.instance/ops?wait=true', { scope: { kind: 'global' }, expected_version: 0, spec: { platform: 'webhook', extension_name: 'webhook', display_name: 'Ops', enabled: true, provider_config: { url: hook } } })).status).to.equal(201);
      expect((await f.api.post('/api/notifications/presets', { name: 'agents', enabled: true, events: ['resource.applied'], filter: 'event=resource.applied', targets: [{ bridge_id: 'ops' }] })).status).to.equal(201);
      await openLive('/notifications', 'table.deliveries[data-loaded="true"]');
      expect(await page.$$('table.deliveries tr[data-id]')).to.have.length(0);
      await f.api.put('/api/resources/agent/live-notified', { scope: { kind: 'global' }, spec: { name: 'live-notified', prompt: 'p' }, expected_version: 0 });
      const delivered = await eventually(async () => {
        const d = (await f.api.get('/api/notifications/deliveries?preset=agents&status=delivered')).body.deliveries;
        expect(d).to.have.length.at.least(1);
        return d;
      }, 30_000);
      await page.waitForSelector(`table.deliveries tr[data-id="${delivered[0].id}"][data-status="delivered"]`, WAIT);
      expect(await sameWindow(), 'the page was not reloaded').to.equal(true);
    } finally {
      await new Promise((r) => receiver.close(r));
    }
  });

  it("shows a record's history from the change log and the spec diff between versions", async () => {
    const body = (prompt: string, v: number) => ({ scope: { kind: 'global' }, spec: { name: 'writer', prompt }, expected_version: v });
    await f.api.put('/api/resources/agent/writer', body('First draft.', 0));
    await f.api.put('/api/resources/agent/other', { ...body('Not this one.', 0), spec: { name: 'other', prompt: 'x' } });
    await f.api.put('/api/resources/agent/writer', body('Second draft.', 1));
    const hist = await f.api.get('/api/resources/agent/writer/history');
    expect(hist.status).to.equal(200);
    expect(hist.body.history.map((h: { version: number; type: string }) => [h.version, h.type])).to.deep.equal([[1, 'put'], [2, 'put']]);
    expect((await f.api.get('/api/resources/agent/never-was/history')).status).to.equal(404);
    expect((await f.api.get('/api/resources/no_such_kind/x/history')).status).to.equal(422);
    await page.goto(url('/resources/agent/writer'));
    await page.waitForSelector('table.history tr[data-version="2"]', WAIT);
    await page.waitForFunction(() => document.querySelector('pre.diff')?.textContent?.includes('+prompt: Second draft.'), WAIT);
    const diff = await texts(page, 'pre.diff .add, pre.diff .del');
    expect(diff).to.deep.equal(['-prompt: First draft.', '+prompt: Second draft.']);
    // A third version, written elsewhere, arrives live and joins the history.
    await f.api.put('/api/resources/agent/writer', body('Third draft.', 2));
    await page.waitForSelector('table.history tr[data-version="3"]', WAIT);
    await page.waitForFunction(() => document.querySelector('pre.yaml')?.textContent?.includes('Third draft.'), WAIT);
    await shot(page, 'history');
  });

  it('lists workspaces, tools with their decision reasons, and a dashboard from /metrics', async () => {
    await page.goto(url('/workspaces'));
    await page.waitForSelector(`tr[data-id="${f.ws.id}"]`, WAIT);
    await shot(page, 'workspaces');
    await page.goto(url(`/tools?workspace_id=${f.ws.id}`));
    await page.waitForSelector('tr[data-id="svc__workspace_read_file"]', WAIT);
    const read = (await texts(page, 'tr[data-id="svc__workspace_read_file"] .layers'))[0];
    expect(read).to.include('registry_policy');
    expect(read).to.include('permission_mode');
    const write = (await texts(page, 'tr[data-id="svc__workspace_write_file"] td .badge'))[0];
    expect(write).to.equal('approval required');
    await shot(page, 'tools');
    await page.goto(url('/dashboard'));
    await f.api.put('/api/resources/agent/dash?wait=true', { scope: { kind: 'global' }, spec: { name: 'dash', prompt: 'p' }, expected_version: 0 });
    await page.waitForSelector('tr[data-kind="agent"]', WAIT);
    await page.waitForFunction(() => Number(document.querySelector('tr[data-kind="agent"] td:nth-child(4)')?.textContent) > 0, WAIT);
    await shot(page, 'dashboard');
    await page.goto(url('/sessions'));
    await page.waitForSelector('button.new-session', WAIT);
    await shot(page, 'sessions');
  });
});

describe('Web console in token mode', function () {
  const f = new ServiceFixture({
    workspace: false,
    env: ({ dataDir }) => {
      const file = path.join(dataDir, 'tokens.yaml');
      writeFileSync(file, `tokens:\n  - {name: console, role: operator, sha256: ${sha256('console-secret')}}\n`);
      return { AUTH_MODE: 'token', AUTH_TOKENS_FILE: file };
    },
  }).install();
  const chromium = new Chromium();

  before(async function () {
    needBrowser(this);
    await chromium.launch();
  });
  after(() => chromium.close());

  it('asks for a token, keeps it in session storage only, and streams with it', async () => {
    const errors: string[] = [];
    const page = await chromium.page(errors);
    try {
      await page.goto(`${f.service.url}/resources/agent`);
      await page.waitForSelector('form.token', WAIT);
      await shot(page, 'token');
      await page.type('form.token input[name=token]', 'wrong');
      await page.click('form.token button');
      await page.waitForFunction(() => document.querySelector('form.token .error')?.textContent?.includes('401'), WAIT);
      expect(await page.evaluate(() => sessionStorage.length)).to.equal(0);
      await page.$eval('form.token input[name=token]', (el) => { (el as HTMLInputElement).value = ''; });
      await page.type('form.token input[name=token]', 'console-secret');
      await page.click('form.token button');
      await page.waitForSelector('table.records[data-loaded="true"]', WAIT);
      expect(await page.evaluate(() => Object.values(sessionStorage))).to.deep.equal(['console-secret']);
      expect(await page.evaluate(() => localStorage.length)).to.equal(0);
      // The watch stream is authenticated too: a record written with the API shows up without a reload.
      const res = await fetch(`${f.service.url}/api/resources/agent/tok?wait=true`, { method: 'PUT', headers: { 'content-type': 'application/json', authorization: 'Bearer console-secret' }, body: JSON.stringify({ scope: { kind: 'global' }, spec: { name: 'tok', prompt: 'p' }, expected_version: 0 }) });
      expect(res.status).to.equal(201);
      await page.waitForSelector('tr[data-id="tok"][data-health="Ready"]', WAIT);
      expect(await page.evaluate(() => document.cookie)).to.equal('');
    } finally {
      await page.close();
    }
    expect(errors.filter((e) => !e.includes('401'))).to.deep.equal([]);
  });
});

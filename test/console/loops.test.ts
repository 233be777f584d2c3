import { expect } from 'chai';
import type { Page } from 'puppeteer-core';
import { ServiceFixture } from '../helpers/fixture.ts';
import { createLoop, loopDef, t } from '../loops/helpers.ts';
import { Chromium, needBrowser, shot, texts } from './browser.ts';

const WAIT = { timeout: 30_000 };

describe('Web console: loop runs (real chromium against a real service)', function () {
  this.timeout(90_000);
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
  const runs = () => `/api/workspaces/${f.ws.id}/loop-runs`;
  const status = async (id: string) => (await f.api.get(`${runs()}/${id}`)).body.run.status;
  const nodeStatus = (id: string) => page.$eval(`svg.loop-graph g.node[data-node="${id}"]`, (el) => el.getAttribute('data-status'));
  const gated = () => createLoop(f, loopDef('release', [
    t('build', [], 'built'),
    { id: 'review', kind: 'gate', depends_on: ['build'], criteria: [{ type: 'human', prompt: 'ship it?' }] },
    t('ship', ['review'], 'shipped'),
  ]));

  it('a parked gate is approved by clicking, and the graph turns done live (nothing decided before the click)', async () => {
    await gated();
    const run = (await f.api.post(`/api/workspaces/${f.ws.id}/loops/release/run`, {})).body.run;
    await page.goto(url(`/loops/${f.ws.id}/${run.id}`));
    await page.waitForSelector('svg.loop-graph g.node[data-node="review"][data-status="waiting"]', WAIT);
    await page.waitForSelector('.gate-panel[data-gate="review"] button.approve', WAIT);
    // NOTE: the run's status and each node's arrive as separate events: wait for each before reading the page.
    await page.waitForSelector('.run-status[data-status="needs-approval"]', WAIT);
    await page.waitForSelector('svg.loop-graph g.node[data-node="build"][data-status="succeeded"]', WAIT);
    expect(await nodeStatus('build')).to.equal('succeeded');
    expect(await nodeStatus('ship')).to.equal('pending');
    expect((await texts(page, '.run-status'))[0]).to.equal('needs-approval');
    await page.evaluate(() => { (window as unknown as { unreloaded: boolean }).unreloaded = true; });
    await shot(page, 'loop-run-parked');
    // Nothing is decided by showing the page: the run still waits on the gate.
    expect(await status(run.id)).to.equal('needs-approval');

    await page.click('.gate-panel button.approve');
    await page.waitForSelector('.run-status[data-status="done"]', WAIT);
    await page.waitForSelector('svg.loop-graph g.node[data-node="ship"][data-status="succeeded"]', WAIT);
    await page.waitForSelector('svg.loop-graph g.node[data-node="review"][data-status="succeeded"]', WAIT);
    expect(await nodeStatus('review')).to.equal('succeeded');
    expect(await page.$('.gate-panel')).to.equal(null);
    expect(await status(run.id)).to.equal('done');
    expect(await page.evaluate(() => (window as unknown as { unreloaded?: boolean }).unreloaded === true), 'the page was not reloaded').to.equal(true);
    await shot(page, 'loop-run-done');
  });

  it('an ended run shows a node that never ran (a fan-out of no items) as not run, never pending', async () => {
    await createLoop(f, loopDef('empty_fan', [
      { id: 'fan', kind: 'fan-out', params: { items: [] } }, t('each', ['fan'], '{{ .item }}'), { id: 'all', kind: 'collect', depends_on: ['each'] },
    ]));
    const run = (await f.api.post(`/api/workspaces/${f.ws.id}/loops/empty_fan/run`, {})).body.run;
    await page.goto(url(`/loops/${f.ws.id}/${run.id}`));
    await page.waitForSelector('.run-status[data-status="done"]', WAIT);
    await page.waitForSelector('svg.loop-graph g.node[data-node="all"][data-status="succeeded"]', WAIT);
    expect(await nodeStatus('each')).to.equal('not-run');
    expect(await page.$$eval('svg.loop-graph g.node', (els) => els.map((e) => e.getAttribute('data-status')))).to.not.include('pending');
  });

  it('reject from the page blocks the run and the gate\'s downstream never runs', async () => {
    await gated();
    const run = (await f.api.post(`/api/workspaces/${f.ws.id}/loops/release/run`, {})).body.run;
    await page.goto(url(`/loops/${f.ws.id}/${run.id}`));
    await page.waitForSelector('.gate-panel button.reject', WAIT);
    await page.click('.gate-panel button.reject');
    await page.waitForSelector('.run-status[data-status="blocked"]', WAIT);
    // NOTE: the run's status and its nodes' arrive as separate events; the graph follows the node's own.
    await page.waitForSelector('svg.loop-graph g.node[data-node="review"][data-status="failed"]', WAIT);
    expect(await nodeStatus('review')).to.equal('failed');
    expect(await nodeStatus('ship')).to.not.equal('succeeded');
    expect(await status(run.id)).to.equal('blocked');
  });

  it('the list shows a workspace\'s runs and follows loop.run.* events: a run started through the API appears and turns done, no reload', async () => {
    await createLoop(f, loopDef('quick', [t('a', []), t('b', ['a'])]));
    await page.goto(url('/loops'));
    await page.waitForSelector('table.loop-runs[data-loaded="true"]', WAIT);
    await page.waitForSelector('[data-live="open"]', WAIT);
    expect(await page.$$('table.loop-runs tr[data-id]')).to.have.length(0);
    const run = (await f.api.post(`/api/workspaces/${f.ws.id}/loops/quick/run`, {})).body.run;
    await page.waitForSelector(`table.loop-runs tr[data-id="${run.id}"][data-status="done"]`, WAIT);
    expect((await texts(page, `table.loop-runs tr[data-id="${run.id}"] td`))[1]).to.equal('quick');
    await page.click(`table.loop-runs tr[data-id="${run.id}"] a`);
    await page.waitForSelector('svg.loop-graph g.node[data-node="b"][data-status="succeeded"]', WAIT);
  });
});

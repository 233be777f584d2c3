import { expect } from 'chai';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { putRecord } from './helpers.ts';

const condition = (status: any, type: string) => status?.conditions?.find((c: any) => c.type === type);

describe('Honest status: a record is Ready only when it can do its job, and a dependency written later turns it Ready', function () {
  this.timeout(60_000);
  const f = new ServiceFixture().install();
  const ws = () => ({ kind: 'workspace', id: f.ws.id });
  const status = async (kind: string, id: string, version = 1) => eventually(async () => {
    const st = (await f.api.get(`/api/resources/${kind}/${id}/status`)).body.status;
    expect(st.observed_version).to.equal(version);
    return st;
  });
  const job = { name: 'nightly', agent_name: 'reviewer', prompt: 'review', enabled: true, schedule: { mode: 'every', interval: '1h' } };

  it('an automation.job naming an agent that does not exist is Degraded AgentNotFound with no schedule, and turns Ready once the agent is written', async () => {
    await putRecord(f.api, 'automation.job', 'nightly', ws(), job);
    const st = await status('automation.job', 'nightly');
    expect(condition(st, 'Ready')).to.include({ status: 'False' });
    expect(condition(st, 'Degraded')).to.include({ status: 'True', reason: 'AgentNotFound' });
    expect(condition(st, 'Degraded').message).to.include('"reviewer"');
    expect(st.next_fire_at).to.equal(null);

    await putRecord(f.api, 'agent', 'reviewer', ws(), { name: 'reviewer', prompt: 'You review.' });
    const ready = await eventually(async () => {
      const now = (await f.api.get('/api/resources/automation.job/nightly/status')).body.status;
      expect(condition(now, 'Ready')).to.include({ status: 'True' });
      return now;
    }, 20_000, 100);
    expect(ready.schedule).to.equal('every 1h');
    expect(Number.isNaN(Date.parse(ready.next_fire_at))).to.equal(false);
  });

  it('a job naming the built-in agent, or a disabled job, is Ready', async () => {
    await putRecord(f.api, 'automation.job', 'builtin', ws(), { ...job, name: 'builtin', agent_name: 'scripted' });
    await putRecord(f.api, 'automation.job', 'off', ws(), { ...job, name: 'off', enabled: false });
    expect(condition(await status('automation.job', 'builtin'), 'Ready')).to.include({ status: 'True' });
    expect(condition(await status('automation.job', 'off'), 'Ready')).to.include({ status: 'True' });
  });

  it('a webhook trigger whose secret ref does not resolve is Degraded SecretUnavailable; one whose agent is missing is Degraded AgentNotFound until it exists', async () => {
    await putRecord(f.api, 'automation.trigger', 'deploys', ws(), { name: 'deploys', agent_name: 'scripted', enabled: true, event: 'webhook', endpoint_slug: 'ci', webhook_secret_ref: 'env:SVC_SECRET_NOT_SET_ANYWHERE', prompt: 'p' });
    const st = await status('automation.trigger', 'deploys');
    expect(condition(st, 'Degraded')).to.include({ status: 'True', reason: 'SecretUnavailable' });
    expect(condition(st, 'Degraded').message).to.include('webhook_secret_ref').and.not.include('undefined');

    await putRecord(f.api, 'automation.trigger', 'ends', ws(), { name: 'ends', agent_name: 'auditor', enabled: true, event: 'session.stopped', prompt: 'p' });
    expect(condition(await status('automation.trigger', 'ends'), 'Degraded')).to.include({ status: 'True', reason: 'AgentNotFound' });
    await putRecord(f.api, 'agent', 'auditor', { kind: 'global' }, { name: 'auditor', prompt: 'You audit.' });
    await eventually(async () => {
      const now = (await f.api.get('/api/resources/automation.trigger/ends/status')).body.status;
      expect(condition(now, 'Ready')).to.include({ status: 'True' });
    }, 20_000, 100);
  });

  it('a bridge.instance whose provider is not installed is Degraded ProviderNotInstalled (and Connected=False)', async () => {
    await putRecord(f.api, 'bridge.instance', 'team', { kind: 'global' }, { platform: 'slack', extension_name: 'slack', display_name: 'Team', enabled: true });
    const st = await status('bridge.instance', 'team');
    expect(condition(st, 'Ready')).to.include({ status: 'False' });
    expect(condition(st, 'Degraded')).to.include({ status: 'True', reason: 'ProviderNotInstalled' });
    expect(condition(st, 'Connected')).to.include({ status: 'False', reason: 'ProviderNotInstalled' });
  });
});

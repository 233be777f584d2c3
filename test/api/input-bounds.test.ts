import { expect } from 'chai';
import { QUOTE_MAX } from '../../api/errors.ts';
import { MAX_DISPLAY_NAME_LENGTH, MAX_ID_LENGTH, MAX_NAME_LENGTH } from '../../codecs/limits.ts';
import { ServiceFixture } from '../helpers/fixture.ts';

// Issue 27 item 4: a route that takes no body takes none; names and ids have maximum lengths; an error body repeats
// only a bounded prefix of what it refuses.

const KB100 = 'n'.repeat(100 * 1024);
/** An error body that quotes one long input: the rest of it is the service's own words, well under this. */
const SHORT_BODY = 2 * QUOTE_MAX + 1024;

describe('Input bounds: bodies where none is taken, name lengths, bounded quoting (HTTP, real Redis)', function () {
  this.timeout(60_000);
  const f = new ServiceFixture().install();

  describe('a route that takes no body', () => {
    const table = [
      { reason: 'a JSON array', body: '[1,2]' },
      { reason: 'an empty array', body: '[]' },
      { reason: 'an object with a field', body: '{"force":true}' },
    ];
    for (const { reason, body } of table) {
      it(`refuses ${reason} on DELETE /api/workspaces/{id} with 400 and deletes nothing`, async () => {
        const res = await f.api.call('DELETE', `/api/workspaces/${f.ws.id}`, body);
        expect(res.status, JSON.stringify(res.body)).to.equal(400);
        expect(res.body.diagnostic).to.include({ code: 'body_not_allowed', category: 'input' });
        expect(res.body.diagnostic.evidence).to.have.property('body');
        expect((await f.api.get(`/api/workspaces/${f.ws.id}`)).status).to.equal(200);
      });
    }

    it('accepts no body and {} (DELETE a workspace, stop a session), and every no-body route refuses a body alike', async () => {
      const s = await f.api.post('/api/sessions', { workspace: f.ws.id });
      expect(s.status, JSON.stringify(s.body)).to.equal(201);
      const id = s.body.session.id;
      for (const path of [`/api/sessions/${id}/stop`, `/api/sessions/${id}/resume`, `/api/sessions/${id}/prompt/cancel`, `/api/sessions/${id}/repair`]) {
        const res = await f.api.call('POST', path, '[1]');
        expect(res.status, path).to.equal(400);
        expect(res.body.diagnostic.code, path).to.equal('body_not_allowed');
      }
      expect((await f.api.get(`/api/sessions/${id}`)).body.session.state).to.not.equal('stopped');
      expect((await f.api.call('POST', `/api/sessions/${id}/stop`, '{}')).status).to.equal(204);
      expect((await f.api.call('DELETE', `/api/sessions/${id}`, '{"x":1}')).status).to.equal(400);
      expect((await f.api.get(`/api/sessions/${id}`)).status).to.equal(200);
      expect((await f.api.call('DELETE', `/api/workspaces/${f.ws.id}`, '{}')).status).to.equal(204);
      expect((await f.api.get(`/api/workspaces/${f.ws.id}`)).status).to.equal(404);
    });

    it('leaves routes with an optional body alone: no body, {} and fields are read as before', async () => {
      // Fire-now takes an optional body: without one it reaches the handler (404 for a missing job, not 400).
      expect((await f.api.call('POST', '/api/automation/jobs/nope/trigger')).status).to.equal(404);
      expect((await f.api.call('POST', '/api/automation/jobs/nope/trigger', '{"workspace_id":"x"}')).status).to.equal(404);
      // A route that does not exist is still 404/405, whatever the body.
      expect((await f.api.call('DELETE', '/api/nowhere', '[1]')).status).to.equal(404);
    });

    it('describes a request body in /api/openapi.json for exactly the routes that take one', async () => {
      const doc = (await f.api.get('/api/openapi.json')).body;
      expect(doc.paths['/api/workspaces/{id}'].delete).to.not.have.property('requestBody');
      expect(doc.paths['/api/sessions/{id}/stop'].post).to.not.have.property('requestBody');
      expect(doc.paths['/api/resources/{kind}/{id}'].put.requestBody.content).to.have.property('application/json');
      expect(doc.paths['/api/resources/{kind}/{id}'].delete).to.have.property('requestBody');
      expect(doc.paths['/api/workspaces/{id}'].patch.requestBody.content).to.have.all.keys('application/json', 'application/merge-patch+json');
      for (const [path, ops] of Object.entries<any>(doc.paths)) for (const [m, op] of Object.entries<any>(ops)) if (m === 'get') expect(op, path).to.not.have.property('requestBody');
    });
  });

  describe('names and ids have a maximum length', () => {
    it(`refuses a 100 KB agent name (PUT and POST /api/agents) with 422 naming the field, and stores nothing`, async () => {
      const put = await f.api.put('/api/resources/agent/long', { scope: { kind: 'global' }, expected_version: 0, spec: { name: KB100, prompt: 'p' } });
      expect(put.status).to.equal(422);
      expect(put.body.diagnostic.evidence).to.deep.include({ 'spec.name': `must be at most ${MAX_NAME_LENGTH} characters` });
      expect((await f.api.get('/api/resources/agent/long')).status).to.equal(404);
      const post = await f.api.post('/api/agents', { scope: 'global', agent: { name: KB100, prompt: 'p', provider: 'local' } });
      expect(post.status).to.equal(422);
      expect(post.body.diagnostic.evidence).to.have.property('spec.name');
      expect((await f.api.get('/api/resources?kind=agent')).body.records).to.deep.equal([]);
      // Nested names are bounded by the same rule, and a name at the limit is fine.
      const nested = await f.api.put('/api/resources/agent/nested', { scope: { kind: 'global' }, expected_version: 0, spec: { name: 'a', prompt: 'p', mcp_servers: [{ name: 'm'.repeat(MAX_NAME_LENGTH + 1), command: 'x' }] } });
      expect(nested.status).to.equal(422);
      expect(nested.body.diagnostic.evidence).to.have.property('spec.mcp_servers[0].name');
      const atLimit = await f.api.put('/api/resources/agent/at-limit', { scope: { kind: 'global' }, expected_version: 0, spec: { name: 'a'.repeat(MAX_NAME_LENGTH), prompt: 'p' } });
      expect(atLimit.status, JSON.stringify(atLimit.body)).to.equal(201);
    });

    it('refuses a 100 KB workspace name on create and patch with 422 naming the field, and stores nothing', async () => {
      const before = (await f.api.get('/api/workspaces')).body.workspaces;
      const create = await f.api.post('/api/workspaces', { root_dir: f.root, name: KB100 });
      expect(create.status).to.equal(422);
      expect(create.body.diagnostic.evidence).to.deep.equal({ name: `must be at most ${MAX_NAME_LENGTH} characters` });
      const patch = await f.api.patch(`/api/workspaces/${f.ws.id}`, { name: KB100 });
      expect(patch.status).to.equal(422);
      expect(patch.body.diagnostic.evidence).to.have.property('name');
      expect((await f.api.get('/api/workspaces')).body.workspaces).to.deep.equal(before);
    });

    it('refuses a 100 KB session name with 422 naming the field, and stores no session', async () => {
      const res = await f.api.post('/api/sessions', { workspace: f.ws.id, name: KB100 });
      expect(res.status).to.equal(422);
      expect(res.body.diagnostic.evidence).to.deep.equal({ name: `must be at most ${MAX_NAME_LENGTH} characters` });
      expect((await f.api.get('/api/sessions')).body.sessions).to.have.length(0);
    });

    it('bounds display names and ids in specs too', async () => {
      const bridge = await f.api.put('/api/resources/bridge.instance/b', { scope: { kind: 'global' }, expected_version: 0, spec: { platform: 'slack', extension_name: 'e', display_name: 'd'.repeat(MAX_DISPLAY_NAME_LENGTH + 1) } });
      expect(bridge.status).to.equal(422);
      expect(bridge.body.diagnostic.evidence).to.have.property('spec.display_name');
      const id = await f.api.put(`/api/resources/agent/${'i'.repeat(MAX_ID_LENGTH + 1)}`, { scope: { kind: 'global' }, expected_version: 0, spec: { name: 'a', prompt: 'p' } });
      expect(id.status).to.equal(422);
    });
  });

  describe('an error body quotes a bounded prefix of what it refuses', () => {
    it('answers a 10 KB id with a short 422 that names the field and shows the id\'s start', async () => {
      const id = 'x'.repeat(10 * 1024);
      const res = await f.api.call('PUT', `/api/resources/agent/${id}`, JSON.stringify({ scope: { kind: 'global' }, expected_version: 0, spec: { name: 'a', prompt: 'p' } }));
      expect(res.status).to.equal(422);
      expect(res.body.diagnostic.code).to.equal('invalid_id');
      expect(res.body.diagnostic.evidence).to.have.property('id');
      expect(JSON.stringify(res.body).length).to.be.below(SHORT_BODY);
      expect(res.body.error).to.include(`${'x'.repeat(QUOTE_MAX)}…(${id.length - QUOTE_MAX} more)`);
    });

    it('bounds what 404s and body-field errors repeat: a long workspace ref, route path and field values', async () => {
      const long = 'w'.repeat(10 * 1024);
      for (const res of [
        await f.api.get(`/api/workspaces/${long}`),
        await f.api.get(`/api/${long}`),
        await f.api.post('/api/workspaces', { root_dir: `/tmp/${long}` }),
        await f.api.post('/api/sessions', { workspace: long }),
      ]) {
        expect(res.status).to.be.within(400, 499);
        const text = JSON.stringify(res.body);
        expect(text.length, text.slice(0, 300)).to.be.below(SHORT_BODY);
        expect(text).to.include('more)');
      }
    });
  });
});

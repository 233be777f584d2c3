import { expect } from 'chai';
import { isSecretKey, redactValue } from '../../runtime/sessions/redact.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { readUiStream } from '../helpers/ui-stream.ts';

describe('Conformance: redaction hides secrets, never usage counters', function () {
  this.timeout(60_000);

  it('classifies key names: credentials are secret, token counters are not', () => {
    const table: { reason: string; key: string; want: boolean }[] = [
      { reason: 'an access token is a secret', key: 'access_token', want: true },
      { reason: 'a bare token is a secret', key: 'token', want: true },
      { reason: 'an API key is a secret', key: 'apiKey', want: true },
      { reason: 'a password is a secret', key: 'db_password', want: true },
      { reason: 'an Authorization header is a secret', key: 'Authorization', want: true },
      { reason: 'input_tokens is a counter', key: 'input_tokens', want: false },
      { reason: 'output_tokens is a counter', key: 'output_tokens', want: false },
      { reason: 'total_tokens is a counter', key: 'total_tokens', want: false },
      { reason: 'max_tokens is a limit', key: 'max_tokens', want: false },
      { reason: 'token_count is a counter', key: 'token_count', want: false },
    ];
    for (const t of table) expect(isSecretKey(t.key), t.reason).to.equal(t.want);
    expect(redactValue({ usage: { input_tokens: 10, output_tokens: 20, total_tokens: 30 }, token: 'abc', secret: 7 }))
      .to.deep.equal({ usage: { input_tokens: 10, output_tokens: 20, total_tokens: 30 }, token: '[REDACTED]', secret: 7 });
  });

  describe('through a real session', () => {
    const f = new ServiceFixture().install();

    it('keeps /usage token counts as numbers in events, the transcript and the live prompt stream', async () => {
      const { api, ws, service } = f;
      const s = (await api.post('/api/sessions', { workspace: ws.id })).body.session;
      const res = await fetch(`${service.url}/api/workspaces/${ws.id}/sessions/${s.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: '/usage 10 20' }) });
      const live = JSON.stringify((await readUiStream(res)).chunks);
      const events = (await api.get(`/api/sessions/${s.id}/events?type=usage`)).body.events;
      const transcript = JSON.stringify((await api.get(`/api/sessions/${s.id}/transcript`)).body);
      const usage = events.map((e: any) => e.content.usage).find((u: any) => u.input_tokens !== undefined);
      expect(usage).to.include({ input_tokens: 10, output_tokens: 20 });
      for (const text of [JSON.stringify(events), transcript, live]) expect(text).to.not.include('[REDACTED]');
    });
  });
});

import { expect } from 'chai';
import { Writable } from 'node:stream';
import { loadConfig } from '../../runtime/process/config.ts';
import { Service } from '../../runtime/process/service.ts';
import { SecretRefs } from '../../runtime/security/child-env.ts';

const SECRET = 'sk-live-0123456789abcdef';

describe('Logs mask every secret value the process resolved', () => {
  it('SecretRefs.mask replaces each resolved value of 8 bytes or more, and nothing else', async () => {
    const refs = new SecretRefs(['SVC_SECRET_*'], { SVC_SECRET_KEY: SECRET, SVC_SECRET_SHORT: 'abc1234' });
    expect(refs.mask(`before ${SECRET}`)).to.equal(`before ${SECRET}`);
    await refs.resolve({ KEY: 'env:SVC_SECRET_KEY', SHORT: 'env:SVC_SECRET_SHORT' });
    expect(refs.mask(`a ${SECRET} b ${SECRET}`)).to.equal('a [REDACTED] b [REDACTED]');
    expect(refs.mask('abc1234 stays: under 8 bytes')).to.equal('abc1234 stays: under 8 bytes');
  });

  it('the service\'s log lines pass through the mask, whatever logs them', async () => {
    const lines: string[] = [];
    const sink = new Writable({ write(chunk, _enc, cb) { lines.push(String(chunk)); cb(); } });
    const saved = process.env.SVC_SECRET_LOGGED;
    process.env.SVC_SECRET_LOGGED = SECRET;
    try {
      const service = new Service(loadConfig({ REDIS_URL: 'redis://127.0.0.1:1', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' }), sink);
      await service.security.secrets.resolve({ K: 'env:SVC_SECRET_LOGGED' });
      service.logger.warn({ header: `Bearer ${SECRET}` }, `a call with ${SECRET} failed`);
      await new Promise((r) => setImmediate(r));
      expect(lines.join('')).to.include('[REDACTED]').and.not.include(SECRET);
    } finally {
      if (saved === undefined) delete process.env.SVC_SECRET_LOGGED; else process.env.SVC_SECRET_LOGGED = saved;
    }
  });
});

import { expect } from 'chai';
import { decodeSpec } from '../../codecs/index.ts';
import type { DecodeContext } from '../../codecs/types.ts';

const G: DecodeContext = { scope: { kind: 'global' } };
const agent = (extra: Record<string, unknown>) => ({ name: 'coder', prompt: 'Write code.', ...extra });

/** Each row: reason (the rule), the agent spec's extra fields, the field path that must be named. */
const rejections: { reason: string; given: Record<string, unknown>; path: string }[] = [
  { reason: 'env keys follow the env key grammar', given: { env: { 'BAD-KEY': 'x' } }, path: 'env.BAD-KEY' },
  { reason: 'secret-like env names belong in secret_env', given: { env: { GITHUB_TOKEN: 'ghp' } }, path: 'env.GITHUB_TOKEN' },
  { reason: 'env values are strings', given: { env: { MODE: 1 } }, path: 'env' },
  { reason: 'secret_env values are env:NAME or vault:providers/<path> refs, not values', given: { secret_env: { API_KEY: 'sk-live-123' } }, path: 'secret_env.API_KEY' },
  { reason: 'secret_env vault refs are in the providers namespace (an agent\'s secrets are its model credentials)', given: { secret_env: { API_KEY: 'vault:mcp/key' } }, path: 'secret_env.API_KEY' },
  { reason: 'agent is not a vault namespace', given: { secret_env: { API_KEY: 'vault:agent/db' } }, path: 'secret_env.API_KEY' },
  { reason: 'secret_env vault refs follow the ref grammar', given: { secret_env: { API_KEY: 'vault:providers/Upper/x' } }, path: 'secret_env.API_KEY' },
  { reason: 'secret_env keys follow the env key grammar', given: { secret_env: { '1KEY': 'env:SVC_SECRET_K' } }, path: 'secret_env.1KEY' },
];

describe('agent codec: env and secret_env of the agent process', () => {
  for (const r of rejections) {
    it(`rejects — ${r.reason}`, () => {
      const res = decodeSpec('agent', agent(r.given), G);
      expect(res.ok).to.equal(false);
      if (!res.ok) expect(res.errors.map((e) => e.path)).to.include(r.path);
    });
  }

  it('keeps declared env and secret refs, and omits empty maps from the canonical spec', () => {
    const res = decodeSpec('agent', agent({ env: { MODE: 'audit', LANG: 'C' }, secret_env: { API_KEY: 'env:SVC_SECRET_KEY', DB: 'vault:providers/db' } }), G);
    expect(res.ok).to.equal(true);
    if (res.ok) expect(res.spec).to.deep.include({ env: { MODE: 'audit', LANG: 'C' }, secret_env: { API_KEY: 'env:SVC_SECRET_KEY', DB: 'vault:providers/db' } });
    const bare = decodeSpec('agent', agent({ env: {}, secret_env: {} }), G);
    expect(bare.ok).to.equal(true);
    if (bare.ok) expect(bare.spec).not.to.have.any.keys('env', 'secret_env');
  });
});

import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../runtime/process/config.ts';

describe('Agent pool settings (AGENT_SESSIONS_PER_PROCESS, SESSION_IDLE_SUSPEND)', () => {
  const base = { REDIS_URL: 'redis://127.0.0.1:6379' };
  const cases: { reason: string; given: Record<string, string>; want: { perProcess: number; idleSuspendMs: number } | RegExp }[] = [
    { reason: 'defaults: 32 sessions per process, suspend after 10 minutes idle', given: {}, want: { perProcess: 32, idleSuspendMs: 600_000 } },
    { reason: 'takes a smaller pool and a short suspension', given: { AGENT_SESSIONS_PER_PROCESS: '2', SESSION_IDLE_SUSPEND: '1s' }, want: { perProcess: 2, idleSuspendMs: 1000 } },
    { reason: 'one session per process is allowed', given: { AGENT_SESSIONS_PER_PROCESS: '1' }, want: { perProcess: 1, idleSuspendMs: 600_000 } },
    { reason: '0 turns suspension off', given: { SESSION_IDLE_SUSPEND: '0' }, want: { perProcess: 32, idleSuspendMs: 0 } },
    { reason: 'off turns suspension off', given: { SESSION_IDLE_SUSPEND: 'off' }, want: { perProcess: 32, idleSuspendMs: 0 } },
    { reason: 'refuses a pool of zero sessions, naming the variable', given: { AGENT_SESSIONS_PER_PROCESS: '0' }, want: /AGENT_SESSIONS_PER_PROCESS="0"/ },
    { reason: 'refuses a suspension that is not a duration, naming the variable', given: { SESSION_IDLE_SUSPEND: 'soon' }, want: /SESSION_IDLE_SUSPEND="soon"/ },
  ];
  for (const { reason, given, want } of cases) {
    it(reason, () => {
      if (want instanceof RegExp) {
        expect(() => loadConfig({ ...base, ...given })).to.throw(ConfigError, want);
        return;
      }
      const c = loadConfig({ ...base, ...given });
      expect({ perProcess: c.agentSessionsPerProcess, idleSuspendMs: c.sessionIdleSuspendMs }).to.deep.equal(want);
    });
  }
});

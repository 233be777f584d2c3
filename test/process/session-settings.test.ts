import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../runtime/process/config.ts';
import type { Config } from '../../runtime/process/types.ts';

/** settings picks the session runtime's settings these cases are about. */
const settings = (c: Config) => ({ perProcess: c.agentSessionsPerProcess, idleSuspendMs: c.sessionIdleSuspendMs, firstActivityMs: c.supervision.firstActivityMs, warnAfterMs: c.supervision.warnAfterMs });
const DEFAULTS = { perProcess: 32, idleSuspendMs: 600_000, firstActivityMs: 60_000, warnAfterMs: 900_000 };

describe('Session runtime settings (AGENT_SESSIONS_PER_PROCESS, SESSION_IDLE_SUSPEND, SESSION_FIRST_ACTIVITY_WARNING)', () => {
  const base = { REDIS_URL: 'redis://127.0.0.1:6379' };
  const cases: { reason: string; given: Record<string, string>; want: Partial<typeof DEFAULTS> | RegExp }[] = [
    { reason: 'defaults: 32 sessions per process, suspend after 10 minutes idle, first-activity warning after 1 minute', given: {}, want: {} },
    { reason: 'takes a smaller pool and a short suspension', given: { AGENT_SESSIONS_PER_PROCESS: '2', SESSION_IDLE_SUSPEND: '1s' }, want: { perProcess: 2, idleSuspendMs: 1000 } },
    { reason: 'one session per process is allowed', given: { AGENT_SESSIONS_PER_PROCESS: '1' }, want: { perProcess: 1 } },
    { reason: '0 turns suspension off', given: { SESSION_IDLE_SUSPEND: '0' }, want: { idleSuspendMs: 0 } },
    { reason: 'off turns suspension off', given: { SESSION_IDLE_SUSPEND: 'off' }, want: { idleSuspendMs: 0 } },
    { reason: 'takes a short first-activity threshold', given: { SESSION_FIRST_ACTIVITY_WARNING: '300ms' }, want: { firstActivityMs: 300 } },
    { reason: 'the first-activity warning may exceed the inactivity warning: the two are independent', given: { SESSION_FIRST_ACTIVITY_WARNING: '20m' }, want: { firstActivityMs: 1_200_000 } },
    { reason: '0 turns the first-activity warning off', given: { SESSION_FIRST_ACTIVITY_WARNING: '0' }, want: { firstActivityMs: 0 } },
    { reason: 'off turns the first-activity warning off', given: { SESSION_FIRST_ACTIVITY_WARNING: 'off' }, want: { firstActivityMs: 0 } },
    { reason: 'refuses a pool of zero sessions, naming the variable', given: { AGENT_SESSIONS_PER_PROCESS: '0' }, want: /AGENT_SESSIONS_PER_PROCESS="0"/ },
    { reason: 'refuses a suspension that is not a duration, naming the variable', given: { SESSION_IDLE_SUSPEND: 'soon' }, want: /SESSION_IDLE_SUSPEND="soon"/ },
    { reason: 'refuses a first-activity warning that is not a duration, naming the variable', given: { SESSION_FIRST_ACTIVITY_WARNING: 'soon' }, want: /SESSION_FIRST_ACTIVITY_WARNING="soon"/ },
  ];
  for (const { reason, given, want } of cases) {
    it(reason, () => {
      if (want instanceof RegExp) {
        expect(() => loadConfig({ ...base, ...given })).to.throw(ConfigError, want);
        return;
      }
      expect(settings(loadConfig({ ...base, ...given }))).to.deep.equal({ ...DEFAULTS, ...want });
    });
  }
});

import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../runtime/process/config.ts';

describe('Prompt supervision settings (SESSION_FIRST_ACTIVITY_WARNING)', () => {
  const base = { REDIS_URL: 'redis://127.0.0.1:6379' };
  const cases: { reason: string; given: Record<string, string>; want: number | RegExp }[] = [
    { reason: 'defaults to one minute, far below the 15 minute inactivity warning', given: {}, want: 60_000 },
    { reason: 'takes a short threshold', given: { SESSION_FIRST_ACTIVITY_WARNING: '300ms' }, want: 300 },
    { reason: 'may exceed the inactivity warning: the two are independent', given: { SESSION_FIRST_ACTIVITY_WARNING: '20m' }, want: 1_200_000 },
    { reason: '0 turns the warning off', given: { SESSION_FIRST_ACTIVITY_WARNING: '0' }, want: 0 },
    { reason: 'off turns the warning off', given: { SESSION_FIRST_ACTIVITY_WARNING: 'off' }, want: 0 },
    { reason: 'refuses a value that is not a duration, naming the variable', given: { SESSION_FIRST_ACTIVITY_WARNING: 'soon' }, want: /SESSION_FIRST_ACTIVITY_WARNING="soon"/ },
  ];
  for (const { reason, given, want } of cases) {
    it(reason, () => {
      if (want instanceof RegExp) {
        expect(() => loadConfig({ ...base, ...given })).to.throw(ConfigError, want);
        return;
      }
      const c = loadConfig({ ...base, ...given });
      expect(c.supervision.firstActivityMs).to.equal(want);
      expect(c.supervision.warnAfterMs).to.equal(900_000);
    });
  }
});

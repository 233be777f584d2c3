import type { Logger } from 'pino';

/** REPEAT_WINDOW_MS: the same error of the same source is logged at most once in this long. */
export const REPEAT_WINDOW_MS = 30_000;
/** Distinct (message, error) pairs remembered; past it they are forgotten, so a flood of new ones is still logged. */
const MAX_KEYS = 1000;

/**
 * RepeatedErrors logs a connection-level error once per REPEAT_WINDOW_MS and counts the repeats in between, which
 * the next line of that error reports (`repeated`). NOTE: while Redis does not answer, each BullMQ worker and
 * connection emits an error on every reconnect attempt (in a 3 s outage, some 430 lines from one process); besides
 * burying the outage's first lines, they filled the shared log sink's bounded buffer, which keeps the newest lines.
 */
export class RepeatedErrors {
  private readonly seen = new Map<string, { at: number; repeated: number }>();

  constructor(private readonly windowMs = REPEAT_WINDOW_MS, private readonly now: () => number = Date.now) {}

  /** listener answers an 'error' listener that logs `msg` at `level` with `bindings`, as the class says. */
  listener(logger: Logger, level: 'warn' | 'error', msg: string, bindings: Record<string, unknown> = {}): (err: Error) => void {
    return (err) => {
      const key = `${msg}\u0000${err.message}`;
      const at = this.now();
      const last = this.seen.get(key);
      if (last && at - last.at < this.windowMs) {
        last.repeated++;
        return;
      }
      if (!last && this.seen.size >= MAX_KEYS) this.seen.clear();
      this.seen.set(key, { at, repeated: 0 });
      logger[level]({ ...bindings, err: err.message, ...(last?.repeated ? { repeated: last.repeated } : {}) }, msg);
    };
  }
}

/** repeatedErrors is the process's one RepeatedErrors: one outage is one set of lines, whichever part saw it. */
export const repeatedErrors = new RepeatedErrors();

/**
 * atTurnEnd runs `fn` when the current event-loop turn's I/O has been handled: one setImmediate runs every callback
 * of a turn, in the order they were added, and a callback added while they run runs in the same pass. NOTE: the
 * bus's batched append and a Redis socket's held writes both wait for the turn's end (event-bus.ts,
 * connections.ts); with an immediate each, whichever was scheduled second would see the other's work only in the
 * next turn (an append written after its socket was uncorked waits a whole turn more). One pass keeps them together.
 */
export function atTurnEnd(fn: () => void): void {
  due.push(fn);
  if (due.length === 1) setImmediate(runDue);
}

const due: (() => void)[] = [];

function runDue(): void {
  let failure: { err: unknown } | undefined;
  for (let i = 0; i < due.length; i++) {
    // NOTE: one failing callback must not cost the others their turn; the first failure is rethrown after them, as
    // an immediate's own would be (an uncaught exception).
    try { due[i](); } catch (err) { failure ??= { err }; }
  }
  due.length = 0;
  if (failure) throw failure.err;
}

import { expect } from 'chai';
import { pino } from 'pino';
import { RepeatedErrors } from '../../runtime/process/repeated-errors.ts';

describe('RepeatedErrors', () => {
  it('logs an error once per window, counts the repeats in between, and tells other errors and sources apart', () => {
    const lines: { msg: string; err: string; repeated?: number; kind?: string }[] = [];
    const logger = pino({ level: 'warn' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    let now = 0;
    const errors = new RepeatedErrors(1_000, () => now);
    const worker = errors.listener(logger, 'error', 'worker error', { kind: 'agent' });
    const other = errors.listener(logger, 'warn', 'connection error');
    const refused = new Error('connect ECONNREFUSED');
    for (let i = 0; i < 5; i++) worker(refused);
    worker(new Error('Connection is closed.'));
    other(refused);
    expect(lines.map((l) => [l.msg, l.err, l.repeated])).to.deep.equal([
      ['worker error', 'connect ECONNREFUSED', undefined],
      ['worker error', 'Connection is closed.', undefined],
      ['connection error', 'connect ECONNREFUSED', undefined],
    ]);
    expect(lines[0].kind).to.equal('agent');
    now = 999;
    worker(refused);
    expect(lines).to.have.length(3);
    now = 1_000;
    worker(refused);
    expect(lines.at(-1)).to.include({ msg: 'worker error', err: 'connect ECONNREFUSED', repeated: 5 });
    now = 2_500;
    worker(refused);
    expect(lines.at(-1)).to.not.have.property('repeated');
  });
});

import { expect } from 'chai';
import { executablesOf, ExecPolicy } from '../../runtime/security/exec-policy.ts';

describe('loop command gates under the exec policy at write time', () => {
  const spec = {
    graph: { nodes: [
      { id: 'work', kind: 'transform' },
      { id: 'tests', kind: 'gate', criteria: [{ type: 'command', check: 'npm test -- --grep x' }, { type: 'human' }, { type: 'command', check: ['/usr/bin/make', 'lint'] }] },
    ] },
    contract: { verification: [{ type: 'command', check: ['rm', '-rf', '/'] }] },
  };

  it('lists every command criterion\'s check as an executable (its program), so writing one needs the admin role', () => {
    expect(executablesOf('loop', spec).map((e) => e.command).sort()).to.deep.equal(['/usr/bin/make', 'npm', 'rm']);
  });

  it('a restricted EXEC_ALLOWLIST refuses the checks outside it and keeps the ones inside', () => {
    const policy = new ExecPolicy(['/usr/bin/make', 'npm']);
    const refused = executablesOf('loop', spec).filter((e) => !policy.check(e).ok).map((e) => e.command);
    expect(refused).to.deep.equal(['rm']);
  });
});

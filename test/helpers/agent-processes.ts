import { readdirSync, readFileSync } from 'node:fs';

/** childPids lists the live child processes of `parent` (from /proc), optionally only those whose argv includes `argvPart`. */
export function childPids(parent: number, argvPart = ''): number[] {
  const out: number[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      if (/^State:\s+Z/m.test(status) || /^PPid:\s+(\d+)$/m.exec(status)?.[1] !== String(parent)) continue;
      if (argvPart && !readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(argvPart)) continue;
      out.push(Number(pid));
    } catch { /* gone meanwhile */ }
  }
  return out;
}

/** rssKiB is a live process's resident set size (VmRSS), in KiB; 0 when it is gone. */
export function rssKiB(pid: number): number {
  try {
    return Number(/^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

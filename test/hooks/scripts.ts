import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Small node scripts real subprocess hooks run (written into a test's temp dir):
 * - audit.mjs <out>: appends the event JSON it read on stdin as one line to <out>, allows;
 * - deny.mjs <reason>: answers {"decision":"deny","reason":<reason>};
 * - crash.mjs [<out>]: appends one line to <out> (counting its runs), then throws (exit 1);
 * - slow-audit.mjs <out>: waits a random 0-150 ms, then appends like audit.mjs (ordering tests).
 */
export function writeHookScripts(dir: string): { audit: string; deny: string; crash: string; slowAudit: string } {
  const readStdin = 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>main(s));';
  const files = {
    audit: `${readStdin}\nimport { appendFileSync } from "node:fs";\nfunction main(s){appendFileSync(process.argv[2], JSON.stringify(JSON.parse(s))+"\\n");}\n`,
    deny: `${readStdin}\nfunction main(){console.log(JSON.stringify({decision:"deny",reason:process.argv[2]}));}\n`,
    crash: `${readStdin}\nimport { appendFileSync } from "node:fs";\nfunction main(){if(process.argv[2])appendFileSync(process.argv[2],"x\\n");throw new Error("hook crashed");}\n`,
    slowAudit: `${readStdin}\nimport { appendFileSync } from "node:fs";\nfunction main(s){setTimeout(()=>appendFileSync(process.argv[2], JSON.stringify(JSON.parse(s))+"\\n"),Math.random()*150);}\n`,
  };
  const out = {} as Record<keyof typeof files, string>;
  for (const [name, body] of Object.entries(files)) {
    const file = path.join(dir, `${name}.mjs`);
    writeFileSync(file, body);
    out[name as keyof typeof files] = file;
  }
  return out;
}

/** lines reads a JSON-lines file a hook wrote (none yet: []). */
export function lines(file: string): Record<string, any>[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

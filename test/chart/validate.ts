// Validates every object rendered by `helm template` against the Kubernetes schemas (kubernetes-models,
// and the prometheus-operator models for PodMonitor). Usage: node --import tsx test/chart/validate.ts FILE...
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';

/** modulePath maps an apiVersion to the kubernetes-models module that holds its kinds. */
function modulePath(apiVersion: string): string {
  if (apiVersion === 'v1') return 'kubernetes-models/v1';
  if (apiVersion.startsWith('monitoring.coreos.com/')) return `@kubernetes-models/prometheus-operator/${apiVersion}`;
  return `kubernetes-models/${apiVersion}`;
}

let count = 0;
let failures = 0;
for (const file of process.argv.slice(2)) {
  for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
    const obj = doc.toJSON() as { apiVersion?: string; kind?: string; metadata?: { name?: string } } | null;
    if (!obj) continue;
    const what = `${file}: ${obj.apiVersion} ${obj.kind} ${obj.metadata?.name}`;
    try {
      const mod = (await import(modulePath(String(obj.apiVersion)))) as Record<string, new (o: unknown) => { validate(): void }>;
      const Model = mod[String(obj.kind)];
      if (!Model) throw new Error(`no schema for kind ${obj.kind}`);
      new Model(obj).validate();
      count++;
    } catch (err) {
      failures++;
      console.error(`INVALID ${what}\n  ${(err as Error).message.split('\n').slice(0, 6).join('\n  ')}`);
    }
  }
}
console.log(`${count} rendered objects valid, ${failures} invalid`);
process.exit(failures || count === 0 ? 1 : 0);

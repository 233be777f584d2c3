import type { Ref } from '../../store/types.ts';

/** SOURCE_KIND is the `source.kind` of every record svcctl writes. */
export const SOURCE_KIND = 'svcctl';

/**
 * sourceRef is the source svcctl stamps on a record: `{kind: "svcctl", id: "<name>.<digest>"}`. NOTE: a source is
 * only `{kind, id}` and the store keeps nothing else per record beside the spec, so the
 * last-applied digest rides in the id, after the source name; prune therefore matches the name client-side.
 */
export function sourceRef(name: string, digest: string): Ref {
  return { kind: SOURCE_KIND, id: `${name}.${digest}` };
}

/** parseSource reads back `{name, digest}` from a record's source, or undefined when svcctl did not write it. */
export function parseSource(src: Ref | undefined): { name: string; digest: string } | undefined {
  if (!src || src.kind !== SOURCE_KIND) return undefined;
  const m = /^(.+)\.([0-9a-f]{32})$/.exec(src.id);
  return m ? { name: m[1], digest: m[2] } : undefined;
}

/** parseSelector reads `--selector source=<name>` (the only selector svcctl knows). */
export function parseSelector(sel: string | undefined): string | undefined {
  if (sel === undefined) return undefined;
  const m = /^source=([A-Za-z0-9][A-Za-z0-9_-]{0,150})$/.exec(sel.trim());
  return m ? m[1] : '';
}

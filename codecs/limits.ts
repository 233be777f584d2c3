// NOTE: the one place the maximum lengths of ids and names are defined; README "Security model" lists them.

/** MAX_ID_LENGTH is the longest record id (one path segment, as a Kubernetes object name) and `id`/`*_id` field. */
export const MAX_ID_LENGTH = 253;
/** MAX_NAME_LENGTH is the longest `name` or `*_name` field: agents, workspaces, sessions, skills, hooks, jobs, references to them. */
export const MAX_NAME_LENGTH = 253;
/** MAX_DISPLAY_NAME_LENGTH is the longest display name or title (`display_name`, `display_title`): text for people, not a key. */
export const MAX_DISPLAY_NAME_LENGTH = 256;

/**
 * MAX_SLUG_LENGTH is the longest name of a kind whose names have a lower-case grammar of their own, as a Kubernetes
 * label value: notification presets (and skills' SKILL.md names).
 */
export const MAX_SLUG_LENGTH = 64;

/** maxLengthOf is the maximum length of a field by its name (the last segment of a path), or undefined when it has none of these. */
export function maxLengthOf(field: string): number | undefined {
  const key = field.slice(field.lastIndexOf('.') + 1);
  if (key === 'display_name' || key === 'display_title') return MAX_DISPLAY_NAME_LENGTH;
  if (key === 'name' || key.endsWith('_name')) return MAX_NAME_LENGTH;
  if (key === 'id' || key.endsWith('_id')) return MAX_ID_LENGTH;
  return undefined;
}

/** tooLong is the problem with a field's value when it is longer than the field's maximum (trimmed, as stored), else undefined. */
export function tooLong(field: string, value: unknown): string | undefined {
  const max = maxLengthOf(field);
  return max !== undefined && typeof value === 'string' && value.length > max && value.trim().length > max ? `must be at most ${max} characters` : undefined;
}

import { ServiceError } from '../../store/errors.ts';

/**
 * MemoryError is an error of the memory family with its own code (`memory.validation` 400,
 * `memory.not_found` 404, `memory.conflict` 409, `memory.too_large` 413, `memory.rejected` 422,
 * `memory.rate_limited` 429, `memory.unavailable` 503); the API answers it as `{code, message, details}`.
 */
export class MemoryError extends ServiceError {
  constructor(readonly status: number, code: string, message: string, details: Record<string, unknown> = {}) {
    super(message, code, details);
  }
}

/**
 * memoryValidation is a 400 naming each bad field in `details`: a value of the wrong type, missing or out of range.
 * `status` 422 is for a request that reads well but cannot be taken as it is: a name that is not a name, a field
 * the route does not take, two readings of one field that disagree.
 */
export function memoryValidation(problems: Record<string, string>, status: 400 | 422 = 400): MemoryError {
  const list = Object.entries(problems).map(([k, v]) => `${k}: ${v}`).join('; ');
  return new MemoryError(status, 'memory.validation', `invalid memory request: ${list}`, { fields: problems });
}

/** memoryWorkspaceMissing is the 404 for a workspace id that names no workspace, under the field that gave it. */
export function memoryWorkspaceMissing(id: string, field = 'workspace_id'): MemoryError {
  return new MemoryError(404, 'memory.not_found', `workspace "${id}" does not exist`, { field, workspace_id: id });
}

/**
 * isMemoryPath tells whether a request path belongs to the memory family, whose errors are all
 * `{code, message, details}`: `/api/memory…` and a workspace's `/api/workspaces/{id}/memory…` (session ledgers).
 */
export function isMemoryPath(path: string): boolean {
  return path === '/api/memory' || path.startsWith('/api/memory/') || /^\/api\/workspaces\/[^/]+\/memory(\/|$)/.test(path);
}

const CODES: Record<number, string> = {
  400: 'memory.validation', 401: 'memory.unauthorized', 403: 'memory.forbidden', 404: 'memory.not_found', 405: 'memory.method_not_allowed',
  409: 'memory.conflict', 413: 'memory.too_large', 415: 'memory.validation', 422: 'memory.validation', 429: 'memory.rate_limited', 503: 'memory.unavailable',
};

/**
 * memoryErrorBody is the memory family's error body (`{code, details, message}`) for any
 * typed error under /api/memory: a MemoryError keeps its code; another layer's error (the body rule's unknown field,
 * malformed JSON, a missing role) gets the family code of its status and its evidence as details.
 */
export function memoryErrorBody(status: number, code: string, message: string, evidence: Record<string, unknown>): { code: string; message: string; details: Record<string, unknown> } {
  const family = code.startsWith('memory.') ? code : CODES[status] ?? 'memory.internal';
  return { code: family, message, details: code.startsWith('memory.') ? evidence : { ...evidence, reason: code } };
}

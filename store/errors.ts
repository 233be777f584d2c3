/**
 * The closed set of typed errors every layer throws; the API's one error middleware maps each to a status
 * and the family's error body. `code` becomes `diagnostic.code`; `evidence` becomes `diagnostic.evidence`.
 */
export abstract class ServiceError extends Error {
  abstract readonly status: number;
  constructor(
    message: string,
    readonly code: string,
    readonly evidence: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** InputError is a request that cannot be decoded at all (malformed JSON, a repeated query parameter, a flag that is not a boolean): 400. */
export class InputError extends ServiceError {
  readonly status = 400;
}

/** ValidationError is well-formed input whose content is invalid: 422, naming each failing field. */
export class ValidationError extends ServiceError {
  readonly status = 422;
}

/** UnauthorizedError is a missing or invalid credential: 401. */
export class UnauthorizedError extends ServiceError {
  readonly status = 401;
}

/** ForbiddenError is a caller who may not do this (its role, the execution policy, a foreign origin): 403. */
export class ForbiddenError extends ServiceError {
  readonly status = 403;
}

/** UnsupportedMediaTypeError is a request body that is not JSON: 415. */
export class UnsupportedMediaTypeError extends ServiceError {
  readonly status = 415;
}

/** NotFoundError is a missing record, workspace or route: 404. */
export class NotFoundError extends ServiceError {
  readonly status = 404;
}

/** ConflictError is a stale version, an existing record on create, or a write to a record owned by another: 409. */
export class ConflictError extends ServiceError {
  readonly status = 409;
}

/** PayloadTooLargeError is a body or spec over its cap: 413. */
export class PayloadTooLargeError extends ServiceError {
  readonly status = 413;
}

/**
 * TooManyRequestsError is a caller over a rate or a cap: 429. `evidence.retry_after_ms` sets the Retry-After
 * header (1 s when absent).
 */
export class TooManyRequestsError extends ServiceError {
  readonly status = 429;
}

/** UnavailableError is a dependency (Redis) that does not answer: 503. */
export class UnavailableError extends ServiceError {
  readonly status = 503;
}

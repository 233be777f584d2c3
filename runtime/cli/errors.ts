/**
 * ExitCode is svcctl's contract with CI (README "svcctl"): 0 ok; 1 the apply/diff found something (a difference, a
 * conflict, a Degraded record, a refused write), the service refused a command, or a fired run was skipped or
 * failed; 2 usage (bad flags, unreadable or invalid manifests); 3 the
 * service could not be reached (connection refused, DNS, timeout before any answer).
 */
export const ExitCode = { ok: 0, failed: 1, usage: 2, unreachable: 3 } as const;

/** CliError ends the command with a message on stderr and its exit code. */
export class CliError extends Error {
  constructor(message: string, readonly code: number = ExitCode.failed) {
    super(message);
    this.name = 'CliError';
  }
}

/** UsageError is a mistake in the command line or the manifests (exit 2). */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, ExitCode.usage);
    this.name = 'UsageError';
  }
}

/** UnreachableError says no answer came from the service (exit 3). */
export class UnreachableError extends CliError {
  constructor(message: string) {
    super(message, ExitCode.unreachable);
    this.name = 'UnreachableError';
  }
}

/** ApiError is an answer of 400 or more, with the service's `{error, diagnostic}` body when it sent one. */
export class ApiError extends CliError {
  constructor(readonly status: number, readonly body: any, what: string) {
    super(`${what}: ${status} ${body?.error ?? (typeof body === 'string' ? body : JSON.stringify(body))}`, ExitCode.failed);
    this.name = 'ApiError';
  }
}

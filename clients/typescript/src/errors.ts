/**
 * The error tree of memstrata, mirrored from the Python package: every non-2xx answer
 * (an RFC 9457 problem+json body) becomes the class named by its `code`, else its status.
 */

export interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  code?: string;
  field?: string;
  errors?: unknown[];
  [key: string]: unknown;
}

export class MemstrataError extends Error {
  static readonly status: number = 500;
  static readonly code: string = "error";
  readonly status: number;
  readonly code: string;
  readonly problem: Problem;
  readonly field: string | undefined;

  constructor(message: string, problem: Problem = {}, status?: number) {
    super(message);
    const cls = new.target as typeof MemstrataError;
    this.name = cls.name;
    this.status = status ?? problem.status ?? cls.status;
    this.code = problem.code ?? cls.code;
    this.problem = problem;
    this.field = problem.field;
  }
}

export class NotFound extends MemstrataError {
  static override readonly status: number = 404;
  static override readonly code: string = "not_found";
}
export class Conflict extends MemstrataError {
  static override readonly status: number = 409;
  static override readonly code: string = "conflict";
}
export class InvalidInput extends MemstrataError {
  static override readonly status: number = 422;
  static override readonly code: string = "invalid_input";
}
export class PayloadTooLarge extends InvalidInput {
  static override readonly status: number = 413;
  static override readonly code: string = "payload_too_large";
}
export class PreconditionFailed extends MemstrataError {
  static override readonly status: number = 412;
  static override readonly code: string = "precondition_failed";
}
export class Expired extends MemstrataError {
  static override readonly status: number = 410;
  static override readonly code: string = "expired";
}
export class RateLimited extends MemstrataError {
  static override readonly status: number = 429;
  static override readonly code: string = "rate_limited";
  /** Seconds the server asked to wait (`Retry-After`), when it said. */
  retryAfter: number | undefined;
}
export class Unauthorized extends MemstrataError {
  static override readonly status: number = 401;
  static override readonly code: string = "unauthorized";
}
export class Forbidden extends MemstrataError {
  static override readonly status: number = 403;
  static override readonly code: string = "forbidden";
}
export class Corruption extends MemstrataError {
  static override readonly status: number = 500;
  static override readonly code: string = "corruption";
}
export class BackendUnavailable extends MemstrataError {
  static override readonly status: number = 503;
  static override readonly code: string = "backend_unavailable";
}

const CLASSES: (typeof MemstrataError)[] = [
  NotFound,
  Conflict,
  InvalidInput,
  PayloadTooLarge,
  PreconditionFailed,
  Expired,
  RateLimited,
  Unauthorized,
  Forbidden,
  Corruption,
  BackendUnavailable,
];
const BY_CODE = new Map(CLASSES.map((c) => [c.code, c]));
// A status shared by two codes maps to the more general class (500 stays the base).
const BY_STATUS = new Map(
  CLASSES.filter((c) => c !== Corruption).map((c) => [c.status, c] as const),
);
BY_STATUS.set(400, InvalidInput);

/** The error for a non-2xx answer: by the problem's `code`, else by its status. */
export function errorFromResponse(
  status: number,
  body: string,
  contentType: string,
  retryAfter: string | null,
): MemstrataError {
  let problem: Problem = {};
  if (contentType.includes("json")) {
    try {
      const parsed: unknown = JSON.parse(body);
      if (parsed && typeof parsed === "object") problem = parsed as Problem;
    } catch {
      // not JSON after all: the text below says what came back
    }
  }
  const cls = (problem.code && BY_CODE.get(problem.code)) || BY_STATUS.get(status) || MemstrataError;
  const message = problem.detail || problem.title || body.slice(0, 200) || `HTTP ${status}`;
  const error = new cls(message, problem, status);
  if (error instanceof RateLimited && retryAfter !== null) {
    const seconds = Number(retryAfter);
    error.retryAfter = Number.isFinite(seconds) ? seconds : undefined;
  }
  return error;
}

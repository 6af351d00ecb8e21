/**
 * The worker's errors: typed, with stable codes, and guards that compare codes (so duplicate
 * package copies agree).
 * @module
 */
import { KeelError } from "@keel/core";

/**
 * A job's own deadline passed before or while it ran: the job is dead-lettered as `expired`.
 *
 * @example
 * ```ts
 * import { isJobExpiredError, JobExpiredError } from "@keel/worker";
 * const e = new JobExpiredError("mail", "m1", 1000, 1200);
 * console.log(isJobExpiredError(e), e.message); // true mail/m1: its deadline passed 200 ms ago
 * ```
 */
export class JobExpiredError extends KeelError {
  constructor(
    readonly queue: string,
    readonly jobId: string,
    readonly deadlineAt: number,
    readonly at: number,
    options?: { cause?: unknown },
  ) {
    super(
      "KEEL_JOB_EXPIRED",
      `${queue}/${jobId}: its deadline passed ${Math.round(at - deadlineAt)} ms ago`,
      options,
    );
    this.name = "JobExpiredError";
  }
}

/**
 * True for a {@link JobExpiredError}.
 *
 * @example
 * ```ts
 * import { isJobExpiredError } from "@keel/worker";
 * console.log(isJobExpiredError(new Error("x"))); // false
 * ```
 */
export function isJobExpiredError(e: unknown): e is JobExpiredError {
  return (e as { code?: unknown } | null)?.code === "KEEL_JOB_EXPIRED";
}

/**
 * A handler reported no progress for `stallMs`: its attempt was cancelled, and the job is retried
 * (this error is retryable) or, with no attempt left, dead-lettered as `exhausted`.
 *
 * @example
 * ```ts
 * import { JobStalledError } from "@keel/worker";
 * const e = new JobStalledError("mail", "m1", 500);
 * console.log(e.retryable, e.message); // true mail/m1: no progress for 500 ms (stallMs)
 * ```
 */
export class JobStalledError extends KeelError {
  readonly retryable = true;
  constructor(
    readonly queue: string,
    readonly jobId: string,
    readonly stallMs: number,
  ) {
    super("KEEL_JOB_STALLED", `${queue}/${jobId}: no progress for ${stallMs} ms (stallMs)`);
    this.name = "JobStalledError";
  }
}

/**
 * A job whose deliveries stalled more than the queue allows (`maxStalls`, BullMQ's
 * `maxStalledCount`): each time, the process running it died or lost its lock, so it is
 * dead-lettered as `stalled` instead of being delivered again. Usually its handler makes the process
 * die (`process.exit`, an uncaught crash, an out-of-memory kill). `stalls` is how many times it
 * stalled, when the engine knows it.
 *
 * @example
 * ```ts
 * import { isJobStalledOutError, JobStalledOutError } from "@keel/worker";
 * const e = new JobStalledOutError("mail", "m1", 2);
 * console.log(isJobStalledOutError(e), e.code, e.retryable); // true KEEL_JOB_STALLED_OUT false
 * ```
 */
export class JobStalledOutError extends KeelError {
  readonly retryable = false;
  constructor(
    readonly queue: string,
    readonly jobId: string,
    readonly stalls: number | undefined,
  ) {
    const times = stalls === undefined ? "" : ` (${stalls} stall${stalls === 1 ? "" : "s"})`;
    super(
      "KEEL_JOB_STALLED_OUT",
      `${queue}/${jobId}: stalled more than maxStalls times${times}: each time, the process running it ` +
        "died or lost its lock; usually its handler crashes the process (process.exit, an uncaught " +
        "error, an out-of-memory kill), so it is dead-lettered instead of being delivered again",
    );
    this.name = "JobStalledOutError";
  }
}

/**
 * True for a {@link JobStalledOutError}, across duplicate package copies.
 *
 * @example
 * ```ts
 * import { isJobStalledOutError } from "@keel/worker";
 * console.log(isJobStalledOutError(new Error("stalled"))); // false
 * ```
 */
export function isJobStalledOutError(e: unknown): e is JobStalledOutError {
  return (e as { code?: unknown } | null)?.code === "KEEL_JOB_STALLED_OUT";
}

/**
 * A job cancelled through its engine's own cancellation (BullMQ: `worker.cancelJob(id, reason)`):
 * its handler got `Cancelled` and its cleanup ran, and the job is dead-lettered as `rejected` with
 * this error (a deliberate stop is not retried).
 *
 * @example
 * ```ts
 * import { JobCancelledError } from "@keel/worker";
 * const e = new JobCancelledError("mail", "m1", "operator");
 * console.log(e.retryable, e.message); // false mail/m1: cancelled through the queue (operator)
 * ```
 */
export class JobCancelledError extends KeelError {
  readonly retryable = false;
  constructor(
    readonly queue: string,
    readonly jobId: string,
    readonly reason: string,
  ) {
    super("KEEL_JOB_CANCELLED", `${queue}/${jobId}: cancelled through the queue (${reason})`);
    this.name = "JobCancelledError";
  }
}

/**
 * A queue used after it was closed (its scope ended).
 *
 * @example
 * ```ts
 * import { isQueueClosedError, QueueClosedError } from "@keel/worker";
 * console.log(isQueueClosedError(new QueueClosedError("mail", "add"))); // true
 * ```
 */
export class QueueClosedError extends KeelError {
  constructor(
    readonly queue: string,
    operation: string,
  ) {
    super("KEEL_QUEUE_CLOSED", `queue ${queue}: ${operation} after the queue was closed`);
    this.name = "QueueClosedError";
  }
}

/**
 * True for a {@link QueueClosedError}.
 *
 * @example
 * ```ts
 * import { isQueueClosedError } from "@keel/worker";
 * console.log(isQueueClosedError(new Error("closed"))); // false
 * ```
 */
export function isQueueClosedError(e: unknown): e is QueueClosedError {
  return (e as { code?: unknown } | null)?.code === "KEEL_QUEUE_CLOSED";
}

/**
 * A handler threw something the worker cannot safely read as an error: not an `Error` at all (a
 * string, `undefined`, a null-prototype object, a Symbol, a Proxy…), or an `Error` one of whose
 * fields throws when read (a `message`, `stack` or `cause` getter, a revoked Proxy in its cause
 * chain). The message describes the value (bounded, whatever it is); the value itself is kept,
 * non-enumerable, on `thrown`. It follows the worker's retry path as any error does: a thrown plain
 * object whose `status`, `statusCode`, `code`, `retryAfterMs` or boolean `retryable` can be read
 * lends them to this error (so `{ status: 503 }` is retried by the default `retryOn`, as it was);
 * anything else is not retryable (`retryable: false`), so it is dead-lettered as `rejected`.
 *
 * @example
 * ```ts
 * import { isJobThrewError, JobThrewError } from "@keel/worker";
 * const e = new JobThrewError("mail", "m1", "a string \"boom\"", "boom");
 * console.log(isJobThrewError(e), e.retryable, e.message); // true false mail/m1: handler threw a string "boom"
 * console.log(e.thrown, Object.keys(e).includes("thrown")); // boom false
 * ```
 */
export class JobThrewError extends KeelError {
  /** False, unless the thrown object said otherwise; `undefined` when its `status` or `code` decides. */
  readonly retryable: boolean | undefined;
  readonly status?: number;
  readonly statusCode?: number;
  readonly retryAfterMs?: number;
  /** The value the handler threw, as it was (non-enumerable: serializers and loggers skip it). */
  declare readonly thrown: unknown;
  constructor(
    readonly queue: string,
    readonly jobId: string,
    /** What was thrown, in words (`a Proxy`, `a string "boom"`); bounded by the caller. */
    readonly description: string,
    thrown: unknown,
    /** What the thrown object said of itself, read safely by the caller. */
    hints: ThrownHints = {},
  ) {
    super("KEEL_JOB_THREW", `${queue}/${jobId}: handler threw ${description}`);
    this.name = "JobThrewError";
    Object.defineProperty(this, "thrown", { value: thrown, enumerable: false });
    const { retryable, status, statusCode, code, retryAfterMs } = hints;
    if (status !== undefined) this.status = status;
    if (statusCode !== undefined) this.statusCode = statusCode;
    if (retryAfterMs !== undefined) this.retryAfterMs = retryAfterMs;
    // The thrown value's own `code` is its cause's business: this error's stays KEEL_JOB_THREW.
    if (code !== undefined) Object.defineProperty(this, "cause", { value: { code }, enumerable: false });
    const decided = status !== undefined || statusCode !== undefined || code !== undefined;
    this.retryable = retryable ?? (decided ? undefined : false);
  }
}

/** What a thrown plain object says of itself that the retry path reads (see {@link JobThrewError}). */
export interface ThrownHints {
  readonly retryable?: boolean;
  readonly status?: number;
  readonly statusCode?: number;
  readonly code?: string | number;
  readonly retryAfterMs?: number;
}

/**
 * True for a {@link JobThrewError}.
 *
 * @example
 * ```ts
 * import { isJobThrewError } from "@keel/worker";
 * console.log(isJobThrewError(new Error("x"))); // false
 * ```
 */
export function isJobThrewError(e: unknown): e is JobThrewError {
  return (e as { code?: unknown } | null)?.code === "KEEL_JOB_THREW";
}

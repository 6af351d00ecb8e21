/**
 * The errors of a worker meeting a failing engine (Redis gone, paused, restarted) or a handler that
 * never lets go: typed, with stable codes, and guards that compare codes.
 * @module
 */
import { KeelError } from "@keel/core";

/**
 * A call to the queue's engine got no answer within the worker's `engineTimeoutMs` (it marks the
 * engine down, a `worker:engine` event, and fails nothing by itself), or a call the queue made for
 * its caller within the BullMQ queue's `callTimeoutMs` (thrown to the caller).
 *
 * @example
 * ```ts
 * import { EngineTimeoutError, isEngineTimeoutError } from "@keel/worker";
 * const e = new EngineTimeoutError("mail", "complete m1", 5000);
 * console.log(isEngineTimeoutError(e), e.message); // true queue mail: complete m1 got no answer within 5000 ms (engineTimeoutMs)
 * ```
 */
export class EngineTimeoutError extends KeelError {
  constructor(
    readonly queue: string,
    readonly call: string,
    readonly timeoutMs: number,
    /** The option that set the bound: the worker's `engineTimeoutMs`, or the queue's `callTimeoutMs`. */
    readonly option = "engineTimeoutMs",
  ) {
    super("KEEL_ENGINE_TIMEOUT", `queue ${queue}: ${call} got no answer within ${timeoutMs} ms (${option})`);
    this.name = "EngineTimeoutError";
  }
}

/**
 * True for an {@link EngineTimeoutError}.
 *
 * @example
 * ```ts
 * import { isEngineTimeoutError } from "@keel/worker";
 * console.log(isEngineTimeoutError(new Error("x"))); // false
 * ```
 */
export function isEngineTimeoutError(e: unknown): e is EngineTimeoutError {
  return (e as { code?: unknown } | null)?.code === "KEEL_ENGINE_TIMEOUT";
}

/**
 * The engine stayed down longer than the worker's `engineDownMs`: the worker fails with this error
 * (after its shutdown), its `cause` the last failure the engine gave.
 *
 * @example
 * ```ts
 * import { EngineUnavailableError } from "@keel/worker";
 * const e = new EngineUnavailableError("mail", 300_000, { cause: new Error("ECONNREFUSED") });
 * console.log(e.code, e.message.startsWith("queue mail: the engine did not answer for 300000 ms")); // KEEL_ENGINE_UNAVAILABLE true
 * ```
 */
export class EngineUnavailableError extends KeelError {
  constructor(
    readonly queue: string,
    readonly downForMs: number,
    options?: { cause?: unknown },
  ) {
    super(
      "KEEL_ENGINE_UNAVAILABLE",
      `queue ${queue}: the engine did not answer for ${Math.round(downForMs)} ms (engineDownMs); ` +
        "the worker stops (give engineDownMs: Infinity to wait for it for as long as the worker runs)",
      options,
    );
    this.name = "EngineUnavailableError";
  }
}

/**
 * True for an {@link EngineUnavailableError}.
 *
 * @example
 * ```ts
 * import { isEngineUnavailableError } from "@keel/worker";
 * console.log(isEngineUnavailableError(new Error("x"))); // false
 * ```
 */
export function isEngineUnavailableError(e: unknown): e is EngineUnavailableError {
  return (e as { code?: unknown } | null)?.code === "KEEL_ENGINE_UNAVAILABLE";
}

/**
 * The engine no longer holds this process's claim on a job (BullMQ: its lock lapsed or its record
 * is gone, e.g. after the event loop was blocked for longer than `lockMs`, or a Redis that forgot
 * its data): the job is not this process's to end. The worker cuts its delivery and reports it as
 * `stalled`; the engine's own recovery redelivers the job.
 *
 * @example
 * ```ts
 * import { isJobLockLostError, JobLockLostError } from "@keel/worker";
 * const e = new JobLockLostError("mail", "m1", "Missing lock for job m1. moveToFinished");
 * console.log(isJobLockLostError(e), e.message); // true mail/m1: this process no longer holds the job (Missing lock for job m1. moveToFinished)
 * ```
 */
export class JobLockLostError extends KeelError {
  constructor(
    readonly queue: string,
    readonly jobId: string,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(
      "KEEL_JOB_LOCK_LOST",
      `${queue}/${jobId}: this process no longer holds the job (${detail})`,
      options,
    );
    this.name = "JobLockLostError";
  }
}

/**
 * True for a {@link JobLockLostError}.
 *
 * @example
 * ```ts
 * import { isJobLockLostError } from "@keel/worker";
 * console.log(isJobLockLostError(new Error("x"))); // false
 * ```
 */
export function isJobLockLostError(e: unknown): e is JobLockLostError {
  return (e as { code?: unknown } | null)?.code === "KEEL_JOB_LOCK_LOST";
}

/**
 * A delivery whose handler was cut and did not end within the cleanup budget (it swallowed
 * `Cancelled` and went on waiting, so the runtime abandoned its task, or its ending was itself cut): the job is dead-lettered as `abandoned` with this error (not
 * retried: a handler that ignores its cut would hold a slot's worth of work each time), or released
 * when the cut was the shutdown's.
 *
 * @example
 * ```ts
 * import { JobAbandonedError } from "@keel/worker";
 * const e = new JobAbandonedError("mail", "m1", "timeout");
 * console.log(e.retryable, e.message); // false mail/m1: its handler did not end within the cleanup budget after its cut (timeout)
 * ```
 */
export class JobAbandonedError extends KeelError {
  readonly retryable = false;
  constructor(
    readonly queue: string,
    readonly jobId: string,
    readonly cut: string,
    options?: { cause?: unknown },
  ) {
    super(
      "KEEL_JOB_ABANDONED",
      `${queue}/${jobId}: its handler did not end within the cleanup budget after its cut (${cut})`,
      options,
    );
    this.name = "JobAbandonedError";
  }
}

/**
 * True for a {@link JobAbandonedError}.
 *
 * @example
 * ```ts
 * import { isJobAbandonedError } from "@keel/worker";
 * console.log(isJobAbandonedError(new Error("x"))); // false
 * ```
 */
export function isJobAbandonedError(e: unknown): e is JobAbandonedError {
  return (e as { code?: unknown } | null)?.code === "KEEL_JOB_ABANDONED";
}

/**
 * `useWorker`'s options: their types, defaults and checks (every option is checked at the call,
 * with a typed error that names it).
 * @module
 */
import { type Backoff, exponential, isTransient, type Operation } from "@keel/core";
import { checkKeys, checkMs, checkObject, checkWhole, invalidType } from "./checks.js";
import type { DeadLetter } from "./engine.js";
import type { ShutdownReport } from "./stats.js";

/**
 * What `retryOn` learns about a failed attempt of a job.
 *
 * @example
 * ```ts
 * import type { JobAttemptInfo } from "@keel/worker";
 * const retryOn = (_e: unknown, info: JobAttemptInfo) => info.timedOut || info.attempt < 2;
 * console.log(retryOn(new Error("x"), { attempt: 1, elapsedMs: 10, timedOut: false })); // true
 * ```
 */
export interface JobAttemptInfo {
  /** The delivery that failed, 1-based. */
  readonly attempt: number;
  /** Since the job's first delivery started. */
  readonly elapsedMs: number;
  /** True when the attempt was cut by its own `timeoutMs`. */
  readonly timedOut: boolean;
}

/**
 * How a worker retries a job: the fields of `retry()`'s policy that apply across deliveries.
 *
 * @example
 * ```ts
 * import { constant } from "@keel/core";
 * import type { WorkerRetry } from "@keel/worker";
 * const policy: WorkerRetry = { attempts: 4, backoff: constant(250), budgetMs: 10_000 };
 * console.log(policy.attempts); // 4
 * ```
 */
export interface WorkerRetry {
  /** Deliveries in all, the first included (default 5; a job's own `attempts` wins). */
  attempts?: number;
  /** Delays between deliveries (default `exponential({ baseMs: 200, factor: 2, maxMs: 3000, jitter: "full" })`). */
  backoff?: Backoff;
  /** Which failures to retry (default `isTransient`); the rest are dead-lettered as `rejected`. */
  retryOn?: (error: unknown, info: JobAttemptInfo) => boolean;
  /** Time for all deliveries, counted from the first one's start: no retry is scheduled past it. */
  budgetMs?: number;
}

/**
 * Options of `useWorker`. Every field is optional.
 *
 * @example
 * ```ts
 * import { constant } from "@keel/core";
 * import type { WorkerOptions } from "@keel/worker";
 * const options: WorkerOptions<string> = {
 *   concurrency: 8,
 *   timeoutMs: 5_000,
 *   retry: { attempts: 3, backoff: constant(100) },
 *   stallMs: 2_000,
 *   drainMs: 10_000,
 * };
 * console.log(options.concurrency); // 8
 * ```
 */
export interface WorkerOptions<T> {
  /** Handlers running at once (default 1). */
  concurrency?: number;
  /** Each delivery's own timeout (default 30,000 ms; finite, so no delivery is unbounded). */
  timeoutMs?: number;
  retry?: WorkerRetry;
  /** A delivery that reports no progress (`job.progress`) for this long is cancelled and retried (default: off). */
  stallMs?: number;
  /** At shutdown, how long in-flight jobs may run on before they are cut and released (default 10,000 ms). */
  drainMs?: number;
  /**
   * How long a cut delivery may take to unwind (default: the cleanup budget in force where the
   * worker starts, `cleanupBudget()`: the runtime's, `run(op, { cleanupBudgetMs })` or `main`'s,
   * 5,000 ms unless set).
   */
  cleanupBudgetMs?: number;
  /** The hard cap on the engine's `close` at shutdown (default 5,000 ms). */
  closeCapMs?: number;
  /**
   * The bound on each call the worker makes to its engine (default 5,000 ms): recording an outcome
   * (complete, retry, dead-letter, release), a progress report, a count, a probe; and, for BullMQ,
   * a fetch that gets no answer. A call that fails or runs past it marks the engine down (a
   * `worker:engine` event): the worker takes no job until a probe gets an answer again.
   */
  engineTimeoutMs?: number;
  /**
   * How long the engine may stay down before the worker fails with `EngineUnavailableError`
   * (default 300,000 ms; `Infinity`: never, the worker waits for it for as long as it runs).
   */
  engineDownMs?: number;
  /** Also called with each dead letter, after the engine has recorded it (a store, an alert). */
  deadLetter?: (letter: DeadLetter<T>) => Operation<void>;
  /** Called once with what the shutdown did. */
  onShutdown?: (report: ShutdownReport) => void;
}

/** The checked options, defaults filled in. */
export interface WorkerConfig<T> {
  readonly concurrency: number;
  readonly timeoutMs: number;
  readonly attempts: number;
  readonly backoff: Backoff;
  readonly retryOn: (error: unknown, info: JobAttemptInfo) => boolean;
  readonly budgetMs: number;
  readonly stallMs: number;
  readonly drainMs: number;
  readonly cleanupBudgetMs: number;
  readonly closeCapMs: number;
  readonly engineTimeoutMs: number;
  readonly engineDownMs: number;
  readonly deadLetter: ((letter: DeadLetter<T>) => Operation<void>) | undefined;
  readonly onShutdown: ((report: ShutdownReport) => void) | undefined;
}

const KEYS = [
  "concurrency",
  "timeoutMs",
  "retry",
  "stallMs",
  "drainMs",
  "cleanupBudgetMs",
  "closeCapMs",
  "engineTimeoutMs",
  "engineDownMs",
  "deadLetter",
  "onShutdown",
] as const;
const RETRY_KEYS = ["attempts", "backoff", "retryOn", "budgetMs"] as const;
const defaultBackoff = exponential({ baseMs: 200, factor: 2, maxMs: 3000, jitter: "full" });

function optionalFunction<F>(parameter: string, v: unknown): F | undefined {
  if (v !== undefined && typeof v !== "function") throw invalidType(parameter, "a function", v);
  return v as F | undefined;
}

/**
 * The options checked, defaults filled in, but for the cleanup budget when none is given: the
 * worker reads the one in force where it starts (`cleanupBudget()`).
 */
export type CheckedOptions<T> = Omit<WorkerConfig<T>, "cleanupBudgetMs"> & {
  readonly cleanupBudgetMs: number | undefined;
};

export function checkWorkerOptions<T>(options: WorkerOptions<T>): CheckedOptions<T> {
  const at = "useWorker(queue, handler, options)";
  checkKeys(at, checkObject(`${at} options`, options), KEYS);
  const o = options;
  const retry = o.retry ?? {};
  checkKeys(`${at} retry`, checkObject(`${at} { retry }`, retry), RETRY_KEYS);
  const backoff = retry.backoff ?? defaultBackoff;
  if (typeof (backoff as Backoff | null)?.next !== "function")
    throw invalidType(`${at} { retry.backoff }`, "a Backoff (constant, exponential, fromDelays)", backoff);
  const attempts = retry.attempts ?? 5;
  if (attempts !== Infinity) checkWhole(`${at} { retry.attempts }`, attempts, 1);
  if (o.stallMs !== undefined && o.stallMs !== Infinity) checkMs(`${at} { stallMs }`, o.stallMs, { min: 1 });
  return {
    concurrency: o.concurrency === undefined ? 1 : checkWhole(`${at} { concurrency }`, o.concurrency, 1),
    timeoutMs:
      o.timeoutMs === undefined
        ? 30_000
        : checkMs(`${at} { timeoutMs }`, o.timeoutMs, { allowInfinity: false, min: 1 }),
    attempts,
    backoff,
    retryOn: optionalFunction(`${at} { retry.retryOn }`, retry.retryOn) ?? isTransient,
    budgetMs: retry.budgetMs === undefined ? Infinity : checkMs(`${at} { retry.budgetMs }`, retry.budgetMs),
    stallMs: o.stallMs ?? Infinity,
    drainMs:
      o.drainMs === undefined ? 10_000 : checkMs(`${at} { drainMs }`, o.drainMs, { allowInfinity: false }),
    cleanupBudgetMs:
      o.cleanupBudgetMs === undefined
        ? undefined
        : checkMs(`${at} { cleanupBudgetMs }`, o.cleanupBudgetMs, { allowInfinity: false }),
    closeCapMs:
      o.closeCapMs === undefined
        ? 5_000
        : checkMs(`${at} { closeCapMs }`, o.closeCapMs, { allowInfinity: false }),
    engineTimeoutMs:
      o.engineTimeoutMs === undefined
        ? 5_000
        : checkMs(`${at} { engineTimeoutMs }`, o.engineTimeoutMs, { allowInfinity: false, min: 1 }),
    engineDownMs: o.engineDownMs === undefined ? 300_000 : checkMs(`${at} { engineDownMs }`, o.engineDownMs),
    deadLetter: optionalFunction(`${at} { deadLetter }`, o.deadLetter),
    onShutdown: optionalFunction(`${at} { onShutdown }`, o.onShutdown),
  };
}

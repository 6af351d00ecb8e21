/**
 * The queue engine: what a job store must provide so that `useWorker` can run its jobs. The
 * embedded engine (`createMemoryQueue`) and the BullMQ engine (`@keel/worker/bullmq`) implement
 * this one interface, and one contract suite (`test/contract.test.ts`) runs against both.
 * @module
 */
import type { Operation } from "@keel/core";

/**
 * One attempt of a job that failed, as the worker recorded it; an engine stores these with the job
 * and hands them back on every later delivery (they travel with it across processes for BullMQ).
 *
 * @example
 * ```ts
 * import type { JobAttempt } from "@keel/worker";
 * const first: JobAttempt = { attempt: 1, startedAt: 0, endedAt: 120, error: new Error("503"), delayMs: 200 };
 * console.log(first.endedAt - first.startedAt); // 120
 * ```
 */
export interface JobAttempt {
  /** 1 for the first delivery. */
  readonly attempt: number;
  /** When the handler started and ended, on the runtime's clock. */
  readonly startedAt: number;
  readonly endedAt: number;
  readonly error: unknown;
  /** The delay before the redelivery that followed, when there was one. */
  readonly delayMs?: number;
}

/**
 * A job as an engine delivers it to a worker: what it holds, and which delivery this is.
 *
 * Invariants: `attempt` ≥ 1 and is the number of this delivery (a release does not spend one, so a
 * released job comes back with the same number); `history` holds the failed attempts before this
 * one, oldest first (`history.length === attempt - 1` unless attempts were released).
 *
 * @example
 * ```ts
 * import { createMemoryQueue, type EngineJob } from "@keel/worker";
 * import { run } from "@keel/core";
 * const job: EngineJob<string> = await run(function* () {
 *   const queue = yield* createMemoryQueue<string>({ name: "mail" });
 *   yield* queue.add("hello", { id: "m1" });
 *   return yield* queue.engine.take();
 * });
 * console.log(job.id, job.data, job.attempt); // m1 hello 1
 * ```
 */
export interface EngineJob<T> {
  readonly id: string;
  readonly data: T;
  /** This delivery's number, 1-based. */
  readonly attempt: number;
  /** The job's own attempt limit (from `add`), or `undefined` for the worker's default. */
  readonly attempts: number | undefined;
  /** The absolute deadline on the runtime's clock, `Infinity` when the job has none. */
  readonly deadlineAt: number;
  readonly priority: number;
  /** When the job was added, on the runtime's clock. */
  readonly addedAt: number;
  readonly history: readonly JobAttempt[];
  /**
   * Set when the engine's own recovery gave up on the job (BullMQ: it stalled more than
   * `maxStalls` times, its process dying each time): the worker dead-letters it as `stalled`, with
   * this error, without running it.
   */
  readonly stalledOut?: unknown;
  /**
   * The trace context the job was added with (`EngineAddOptions.trace`, or what a plain BullMQ
   * producer stored in its telemetry), when it has one; opaque to the worker, which passes it on.
   */
  readonly trace?: Readonly<Record<string, string>>;
}

/**
 * The options an engine's `add` receives, checked and normalized by the queue (`ttlMs` already
 * turned into `deadlineAt`).
 *
 * @example
 * ```ts
 * import type { EngineAddOptions } from "@keel/worker";
 * const options: EngineAddOptions = { id: "order-7", deadlineAt: 60_000, attempts: 3, priority: 0, delayMs: 0 };
 * console.log(Object.keys(options).length); // 5
 * ```
 */
export interface EngineAddOptions {
  /** The idempotency key; the engine makes one up when absent. */
  readonly id: string | undefined;
  readonly deadlineAt: number;
  readonly attempts: number | undefined;
  /** Lower runs first; 0 (the default) before any other. */
  readonly priority: number;
  /** The job is not delivered before `now + delayMs`. */
  readonly delayMs: number;
  /**
   * Trace context to store with the job and hand back on every delivery (`EngineJob.trace`): W3C
   * `traceparent` and `tracestate`, as a tracer wrote them at `add` (see `worker:add`). Opaque
   * strings; absent when nobody traces.
   */
  readonly trace?: Readonly<Record<string, string>>;
}

/**
 * What `add` did. An `id` is an idempotency key for as long as the engine keeps the job's record:
 * adding an id that is waiting, delayed or active, or that has ended (completed or dead-lettered),
 * adds nothing (`added: false`) and leaves that job as it is; `state` says where it stands. An ended
 * job is never erased by an `add`: its record (a dead letter and its history) stays.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createMemoryQueue } from "@keel/worker";
 * const [a, b] = await run(function* () {
 *   const queue = yield* createMemoryQueue<number>({ name: "n" });
 *   return [yield* queue.add(1, { id: "x" }), yield* queue.add(2, { id: "x" })];
 * });
 * console.log(a, b); // { id: "x", added: true, state: "waiting" } { id: "x", added: false, state: "waiting" }
 * ```
 */
export interface AddResult {
  readonly id: string;
  /** False when a job with this id already existed: nothing was added. */
  readonly added: boolean;
  /** The state of the job with this id after the call: the new job's, or the existing one's. */
  readonly state: JobState;
}

/**
 * Where a job stands in its engine's records.
 *
 * @example
 * ```ts
 * import type { JobState } from "@keel/worker";
 * const ended = (s: JobState) => s === "completed" || s === "dead-lettered";
 * console.log(ended("active"), ended("dead-lettered")); // false true
 * ```
 */
export type JobState = "waiting" | "delayed" | "active" | "completed" | "dead-lettered";

/**
 * Why a job was dead-lettered: its deadline passed (`expired`), its attempts, retry budget or the
 * time left before its deadline ran out (`exhausted`), its handler failed with an error that is
 * not retryable (`rejected`), its deliveries stalled more than the engine allows (`stalled`: the
 * process running it died or lost it, `maxStalls` times over), or its handler ignored a cut and
 * never returned, so the runtime abandoned it (`abandoned`).
 *
 * @example
 * ```ts
 * import type { DeadLetterReason } from "@keel/worker";
 * const reasons: DeadLetterReason[] = ["expired", "exhausted", "rejected", "stalled", "abandoned"];
 * console.log(reasons.length); // 5
 * ```
 */
export type DeadLetterReason = "expired" | "exhausted" | "rejected" | "stalled" | "abandoned";

/**
 * A dead job, with why it died, the last error and every failed attempt.
 *
 * @example
 * ```ts
 * import type { DeadLetter } from "@keel/worker";
 * const dead: DeadLetter<string> = {
 *   id: "j1", data: "payload", reason: "rejected", error: new TypeError("bad payload"), history: [], at: 10,
 * };
 * console.log(dead.reason, (dead.error as Error).message); // rejected bad payload
 * ```
 */
export interface DeadLetter<T> {
  readonly id: string;
  readonly data: T;
  readonly reason: DeadLetterReason;
  /** The error that ended it (a `JobExpiredError` for `expired`); `undefined` only for a job expired before it ever ran. */
  readonly error: unknown;
  readonly history: readonly JobAttempt[];
  /** When it was dead-lettered, on the runtime's clock. */
  readonly at: number;
}

/**
 * The engine's own counts, read from its records (for BullMQ, from Redis).
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createMemoryQueue } from "@keel/worker";
 * const counts = await run(function* () {
 *   const queue = yield* createMemoryQueue<number>({ name: "n" });
 *   yield* queue.add(1);
 *   yield* queue.add(2, { delayMs: 1000 });
 *   return yield* queue.engine.counts();
 * });
 * console.log(counts); // { waiting: 1, delayed: 1, active: 0, completed: 0, deadLettered: 0 }
 * ```
 */
export interface EngineCounts {
  readonly waiting: number;
  readonly delayed: number;
  readonly active: number;
  readonly completed: number;
  readonly deadLettered: number;
}

/**
 * What a queue engine must provide. Every method is an operation run in the worker's task tree, so
 * it is cancellable and bounded by the deadlines above it. A job moves through these states:
 *
 * ```
 * add ──> waiting/delayed ──take──> active ──complete──> completed
 *              ^                      │  ├──deadLetter──> dead-lettered (reason, error, history)
 *              ├──────retry(delayMs)──┤  │
 *              └──────release─────────┘  (an attempt is not spent)
 * ```
 *
 * Rules every engine keeps (the contract suite pins them):
 * - `add` with an `id` the engine holds (waiting, delayed, active) or has ended (completed,
 *   dead-lettered) adds nothing and returns `added: false` with the job's state; an ended job's
 *   record is never erased by it. A payload the engine cannot store is refused at `add`, with
 *   nothing half-added.
 * - `take` waits until a job is due (its delay passed), then hands over the first by priority, then
 *   by order of becoming due, and marks it active. The worker calls it only when it has a free slot.
 *   A `take` cancelled while it waits takes nothing for the worker: a job it had asked for (BullMQ's
 *   fetch in flight) waits for the next `take`, or is put back by `close`. It throws
 *   `QueueClosedError` once closed.
 * - Each active job ends with exactly one of `complete`, `retry`, `deadLetter` or `release`. `retry`
 *   spends an attempt (the next delivery has `attempt + 1` and the record appended to `history`) and
 *   delays the job by `delayMs`; `release` puts it back at once with the same `attempt`.
 * - `takingNext` on `complete` and `deadLetter` says the worker will take again in the slot this job
 *   frees: the engine may fetch the next job in the same round trip (BullMQ does) and hand it to the
 *   next `take`. A job fetched so and never taken is put back by `close`.
 * - `progress` stores the value (BullMQ: `job.updateProgress`); the worker also treats it as a
 *   heartbeat, so the engine need not.
 * - A `take` that throws an error with `fatal: true` fails the worker at once: the engine cannot
 *   work at all (BullMQ: a worker's first connection never came up, a configuration error).
 * - An engine whose calls can fail (BullMQ on Redis) throws `JobLockLostError` from an ending call
 *   when it no longer holds the job for this process (its lock lapsed or its record is gone), and
 *   any other error when it could not answer: the worker bounds every call (`engineTimeoutMs`),
 *   treats the latter as an outage (the engine is down), and ends the delivery as `stalled` (see
 *   `forget`) when its outcome cannot be recorded.
 * - `close` is a worker saying it is done: the engine frees what it holds for consuming (BullMQ: the
 *   `Worker` and its blocking connection), and says how many jobs fetched ahead it put back. It may
 *   take time (BullMQ's can hang): the worker races it against a hard cap. The queue itself stays
 *   usable (to add, to count, for another worker) until its own scope ends; `take` on a queue whose
 *   scope has ended throws `QueueClosedError`.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createMemoryQueue, type QueueEngine } from "@keel/worker";
 * const outcome = await run(function* () {
 *   const queue = yield* createMemoryQueue<string>({ name: "mail" });
 *   const engine: QueueEngine<string> = queue.engine;
 *   yield* queue.add("hello");
 *   const job = yield* engine.take();
 *   yield* engine.retry(job, { delayMs: 0, error: new Error("busy"), startedAt: 0, endedAt: 0 });
 *   const again = yield* engine.take();
 *   yield* engine.complete(again, "sent");
 *   return { attempt: again.attempt, counts: yield* engine.counts() };
 * });
 * console.log(outcome.attempt, outcome.counts.completed); // 2 1
 * ```
 */
export interface QueueEngine<T> {
  /** The queue's name: the first part of every job task's name. */
  readonly name: string;
  add(data: T, options: EngineAddOptions): Operation<AddResult>;
  /**
   * Waits for the next due job and marks it active. With `boundMs`, a take whose engine stops
   * answering (BullMQ: a fetch with no answer for that long past its own poll) throws instead of
   * waiting on; waiting for a job that does not come is not a failure, and is never cut.
   */
  take(boundMs?: number): Operation<EngineJob<T>>;
  /**
   * Ends the job as completed; `value` is what its handler returned (BullMQ: the job's
   * `returnvalue`, null for a value JSON cannot hold; the embedded engine keeps none).
   */
  complete(job: EngineJob<T>, value?: unknown, takingNext?: boolean): Operation<void>;
  /** Spends the attempt: records it in the job's history and redelivers it after `delayMs`. */
  retry(
    job: EngineJob<T>,
    failure: { delayMs: number; error: unknown; startedAt: number; endedAt: number },
  ): Operation<void>;
  deadLetter(
    job: EngineJob<T>,
    letter: { reason: DeadLetterReason; error: unknown; history: readonly JobAttempt[] },
    takingNext?: boolean,
  ): Operation<void>;
  /** Puts the job back at once without spending its attempt (a shutdown's cut, a stop before start). */
  release(job: EngineJob<T>): Operation<void>;
  progress(job: EngineJob<T>, value: unknown): Operation<void>;
  counts(): Operation<EngineCounts>;
  /** The dead letters the engine keeps, oldest first. */
  deadLetters(): Operation<readonly DeadLetter<T>[]>;
  /**
   * The worker is done consuming (see the rules above). Returns how many jobs the engine had fetched
   * for this worker and put back without a `take` (the shutdown reports them as released); an engine
   * that never fetches ahead may return nothing.
   */
  close(): Operation<number | void>;
  /**
   * The engine's own cancellation of a job this process runs (BullMQ: the queue's
   * `cancelJob(id, reason)`, or `lost` when the job's lock lapsed and this process no longer holds
   * it): the worker registers `cancel` when a delivery starts and `null` when it ends; the engine
   * calls it at most once, at once if the cancellation came first. Absent from an engine that has
   * no cancellation of its own.
   */
  onCancel?(job: EngineJob<T>, cancel: ((reason: string, kind?: "cancelled" | "lost") => void) | null): void;
  /**
   * The worker gives up on ending `job` (its outcome could not be recorded: the engine did not
   * answer, or no longer holds the job for this process): the engine stops holding it (BullMQ: its
   * lock is no longer extended, so its stalled check puts it back once the lock lapses). An engine
   * whose calls cannot fail need not have it.
   */
  forget?(job: EngineJob<T>): void;
}

/**
 * One delivery of a job: its handler under the deadline `min(job deadline, now + timeoutMs)`, a
 * stall watchdog, and the one outcome it ends with (completed, retried, dead-lettered, released).
 * @module
 */
import {
  emitEvent,
  eventsWanted,
  isCancelled,
  type Operation,
  sleep,
  spawn,
  type Task,
  timeout,
  timeoutAt,
} from "@keel/core";
import { invalidType } from "./checks.js";
import { isJobLockLostError } from "./engine-errors.js";
import { JobExpiredError } from "./errors.js";
import { Bound, Sync } from "./op.js";
import { baseOf, complete, deadLetter, type Failed, settle } from "./outcome.js";
import type { Delivery, Pool } from "./pool.js";
import { safeThrown } from "./thrown.js";
import type { Job } from "./worker.js";

/**
 * The delivery's task: the handler under `min(job deadline, now + timeoutMs)`, then the one outcome.
 * A cut (the shutdown's, the stall watchdog's, the engine's own cancellation, a lost lock) cancels
 * this task while its handler runs; the task only records how the handler ended (`d.result`), and
 * its slot ends the job once the task is done (`endAfterCut`): a task past its cleanup budget
 * has every wait cut, so a call to the engine made from it could be cut halfway (sent, its answer
 * never read).
 */
export function* deliver<T>(
  pool: Pool<T>,
  d: Delivery<T>,
  attempts: number,
): Generator<unknown, void, unknown> {
  d.started = true;
  try {
    const { engine, config, clock } = pool;
    const job = d.job;
    const startedAt = clock.now();
    d.startedAt = startedAt;
    if (d.cut === "released") {
      // Cut by the shutdown before it began: put back, never run.
      return yield* settle(pool, d, CUT, startedAt, attempts);
    }
    if (job.stalledOut !== undefined) {
      // Its processes died running it, maxStalls times over: it is not run again.
      if (!pool.claim(d)) return;
      return yield* deadLetter(pool, d, "stalled", job.stalledOut, job.history);
    }
    if (job.deadlineAt <= startedAt) {
      // A job already expired when taken is not run.
      if (!pool.claim(d)) return;
      const error = new JobExpiredError(engine.name, job.id, job.deadlineAt, startedAt);
      return yield* deadLetter(pool, d, "expired", error, job.history);
    }
    d.lastProgressAt = startedAt;
    const until = Math.min(job.deadlineAt, startedAt + config.timeoutMs);
    d.until = until;
    // Asked once per delivery, so a delivery reports both its start and its completion or neither
    // (as a timeout scope does): with nobody listening, the two transitions every job makes build
    // no event (~0.7 µs per job on the embedded queue). The rarer ones (retry, dead letter,
    // release) always emit.
    const base = (yield* eventsWanted()) ? baseOf(engine.name, job) : null;
    if (base)
      yield* emitEvent({
        ...base,
        transition: "start",
        attempts,
        deadlineLeftMs: Math.max(0, until - startedAt),
        ...(job.trace ? { trace: job.trace } : {}),
      });
    // From here a cut cancels this task: it is delivered in the handler (or at the watchdog's spawn).
    d.running = true;
    const onCancel =
      engine.onCancel &&
      ((reason: string, kind?: "cancelled" | "lost") => {
        if (kind === "lost") return cut(d, "lost", `${engine.name}/${job.id}: ${reason}`);
        d.cancelReason = reason;
        cut(d, "cancelled", `${engine.name}/${job.id}: cancelled through the queue (${reason})`);
      });
    if (onCancel) engine.onCancel?.(job, onCancel);
    let watchdog: Task<void> | null = null;
    let failed: Failed | null = null;
    try {
      if (config.stallMs !== Infinity)
        watchdog = yield* spawn(new Bound(watchStall<T>, pool, d, undefined), { name: "stall watchdog" });
      const view = new JobView(pool, d, attempts);
      // A job added with no deadline: only the worker's own `timeoutMs` bounds it (`warnNoDeadline`
      // says so, as for an HTTP call bounded only by the client's default total).
      if (job.deadlineAt === Infinity)
        yield* emitEvent({ type: "deadline:missing", call: "job", label: d.task?.name ?? job.id });
      d.value = yield* underDeadline(pool, view, until);
    } catch (error) {
      d.running = false;
      if (onCancel) engine.onCancel?.(job, null);
      // A cut's `Cancelled` unwinds the task: its slot ends the job. (A cancellation that is not
      // a cut, the worker torn down without its shutdown, ends nothing: the engine holds the job.)
      // Any other thrown value is made safe to read first (a Proxy, a throwing getter).
      const thrown = safeThrown(error, engine.name, job.id);
      if (isCancelled(thrown)) throw error;
      failed = { ok: false, error: thrown };
    }
    d.running = false;
    if (onCancel) engine.onCancel?.(job, null);
    if (d.cut !== null) {
      // Cut, and the handler returned or threw anyway: its slot ends the job, as it says.
      d.result = failed ?? RETURNED;
      return;
    }
    if (watchdog) yield* watchdog.cancel();
    if (failed) return yield* settle(pool, d, failed, until, attempts);
    yield* complete(pool, d, base);
  } catch (error) {
    if (isCancelled(error)) throw error;
    // Outside the handler and not the engine's outage (the dead-letter sink, an engine's defect):
    // the worker fails with it, after its shutdown has drained the other deliveries.
    pool.fail(error);
  } finally {
    d.unwound = true;
    // Ended here once settled; otherwise its slot ends the job, then the delivery.
    if (d.settled) pool.end(d);
  }
}

/** Cuts `d`'s handler, if it still runs: cancels the delivery's task, which settles as it unwinds. */
export function cut<T>(d: Delivery<T>, why: NonNullable<Delivery<T>["cut"]>, message: string): void {
  d.cut ??= why;
  if (d.running) d.task?.cancel(message);
}

/** The job as its handler sees it. */
class JobView<T> implements Job<T> {
  readonly id: string;
  readonly data: T;
  readonly attempt: number;
  readonly deadline: number;
  readonly queue: string;
  readonly #pool: Pool<T>;
  readonly #delivery: Delivery<T>;

  constructor(
    pool: Pool<T>,
    d: Delivery<T>,
    readonly attempts: number,
  ) {
    this.id = d.job.id;
    this.data = d.job.data;
    this.attempt = d.job.attempt;
    this.deadline = d.job.deadlineAt;
    this.queue = pool.engine.name;
    this.#pool = pool;
    this.#delivery = d;
  }

  progress(value: unknown): Operation<void> {
    return new Bound(reportProgress<T>, this.#pool, this.#delivery, value);
  }
}

/**
 * A progress report: the heartbeat is local (`stallMs` watches it), the stored value best effort.
 * It never fails the handler for the engine's sake: while the engine is down it is not sent, and a
 * call that fails or runs past `engineTimeoutMs` marks the engine down (a lost lock cuts the
 * delivery).
 */
function* reportProgress<T>(
  pool: Pool<T>,
  d: Delivery<T>,
  value: unknown,
): Generator<unknown, void, unknown> {
  const { engine, health, clock } = pool;
  d.lastProgressAt = clock.now();
  if (health.down) return;
  try {
    const op = engine.progress(d.job, value);
    if (op instanceof Sync) return yield* op;
    yield* health.call(`progress ${d.job.id}`, op);
  } catch (e) {
    if (isCancelled(e)) throw e;
    if (isJobLockLostError(e)) cut(d, "lost", `${engine.name}/${d.job.id}: ${(e as Error).message}`);
  }
}

const CUT: Failed = { ok: false, error: undefined };
const RETURNED = "returned";

/** The handler's operation under the delivery's deadline. */
function underDeadline<T>(pool: Pool<T>, job: Job<T>, until: number): Operation<unknown> {
  const op = pool.handler(job);
  if (typeof (op as Operation<unknown> | null)?.[Symbol.iterator] !== "function")
    throw invalidType(
      `useWorker(queue, handler): handler(job) for ${job.queue}/${job.id}`,
      "an operation",
      op,
    );
  // `timeout(ms)` when the worker's own timeout is the nearer (the common case): its label formats
  // a whole number, where `timeoutAt`'s formats an instant (a fractional epoch on the real clock).
  return until === job.deadline ? timeoutAt(until, op) : timeout(pool.config.timeoutMs, op);
}

function* watchStall<T>(pool: Pool<T>, d: Delivery<T>): Generator<unknown, void, unknown> {
  const { clock, config } = pool;
  for (;;) {
    const quietMs = clock.now() - d.lastProgressAt;
    if (quietMs >= config.stallMs) break;
    yield* sleep(config.stallMs - quietMs);
  }
  cut(d, "stalled", `${pool.engine.name}/${d.job.id}: no progress for ${config.stallMs} ms`);
}

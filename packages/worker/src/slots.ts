/**
 * The worker's slots: `concurrency` tasks, each taking a job when it is free and running it as a
 * child task (`queue/id attempt k/N`). They live in a resource of the worker's own ("deliveries"):
 * the worker's cancellation does not reach a resource (semantics §2: resources are torn down when
 * their scope exits, after the body's cleanup), so the shutdown, in the worker's `finally`, stops
 * the slots itself: the idle ones at once, the busy ones after their delivery, which it drains,
 * then cuts.
 * @module
 */
import { isCancelled, isTaskCancelledError, resource, spawn, withCleanupBudget } from "@keel/core";
import { deliver } from "./delivery.js";
import type { EngineJob } from "./engine.js";
import { isQueueClosedError } from "./errors.js";
import { Bound } from "./op.js";
import { endAfterCut } from "./outcome.js";
import type { Pool, Slot } from "./pool.js";

/** Starts the slots of `pool`, in a resource of the caller's scope. */
export function* useSlots<T>(pool: Pool<T>): Generator<unknown, void, unknown> {
  // In the worker's own region: an error outside a handler fails the worker from here, so its
  // shutdown drains the deliveries still running (a failing slot would cancel them at once).
  yield* spawn(new Bound(failOnError<T>, pool, undefined, undefined), {
    name: `${pool.engine.name}: errors`,
  });
  yield* spawn(new Bound(probe<T>, pool, undefined, undefined), {
    name: `${pool.engine.name}: engine health`,
  });
  yield* resource<void>(
    function* deliveries(provide) {
      // A delivery's cleanup budget is the worker's `cleanupBudgetMs` (the cut's).
      yield* withCleanupBudget(pool.config.cleanupBudgetMs, function* slots() {
        for (let i = 0; i < pool.config.concurrency; i++) {
          const s: Slot = { task: null, idle: false };
          pool.slots.push(s);
          s.task = yield* spawn(new Bound(slot<T>, pool, s, undefined), {
            name: `${pool.engine.name}: slot ${i + 1}`,
          });
        }
        yield* provide(undefined);
      });
    },
    { name: `${pool.engine.name}: deliveries` },
  );
}

/** Takes a job when free, runs it, and again, until the worker stops taking. */
function* slot<T>(pool: Pool<T>, s: Slot): Generator<unknown, void, unknown> {
  const { engine, config, health } = pool;
  while (pool.taking) {
    let job: EngineJob<T>;
    s.idle = true;
    try {
      // Nothing is taken while the engine is down: the prober says when it is back.
      if (health.down) yield* health.whenUp(`${engine.name}: the engine is down, taking nothing`);
      job = yield* engine.take(config.engineTimeoutMs);
    } catch (e) {
      if (isCancelled(e)) throw e;
      // A closed queue ends the slot; any other error is the engine's outage (the worker fails
      // only if it lasts past `engineDownMs`).
      if (isQueueClosedError(e)) return;
      // An engine that cannot work at all (BullMQ: a worker whose first connection never came up)
      // fails the worker at once: a wrong address is not an outage to wait out.
      if ((e as { fatal?: unknown } | null)?.fatal === true) return pool.fail(e);
      yield* health.fault(e);
      continue;
    } finally {
      s.idle = false;
    }
    // Nothing suspends between the take and this: a job taken is accounted for.
    const d = pool.begin(job);
    try {
      if (health.down) yield* health.answered();
      try {
        const attempts = job.attempts ?? config.attempts;
        // Every record about the delivery, or a task under it, names its job; so do the lines of
        // a logger whose mixin reads `logFields()`, promise code in the handler included.
        d.task = yield* spawn(new Bound(deliver<T>, pool, d, attempts), {
          name: `${engine.name}/${job.id} attempt ${job.attempt}/${attempts}`,
          logFields: { queue: engine.name, jobId: job.id, attempt: job.attempt },
        });
        yield* d.task;
      } catch (e) {
        // A delivery cut ends cancelled, its outcome settled: the slot goes on. (A delivery
        // reports its other errors to the pool rather than failing; an abandoned one fails with
        // what it had recorded.)
        if (isCancelled(e)) throw e;
        if (!isTaskCancelledError(e) && d.settled) throw e;
      }
      // Cut, or abandoned by the runtime (its handler ignored its cut): its job is ended here, by
      // a task that is not cut, so that it never stays active (or locked) for ever.
      if (d.started && !d.settled) yield* endAfterCut(pool, d, job.attempts ?? config.attempts);
    } finally {
      // A delivery ends itself once settled; this is for one whose task ended before it began.
      pool.end(d);
    }
  }
}

function* failOnError<T>(pool: Pool<T>): Generator<unknown, void, unknown> {
  yield* pool.failed();
}

function* probe<T>(pool: Pool<T>): Generator<unknown, void, unknown> {
  yield* pool.health.probe();
}

/**
 * The worker's slots: `concurrency` tasks, each taking a job when it is free and running it as a
 * child task (`queue/id attempt k/N`). They live in a resource of the worker's own ("deliveries"):
 * the worker's cancellation does not reach a resource (semantics §2: resources are torn down when
 * their scope exits, after the body's cleanup), so the shutdown, in the worker's `finally`, stops
 * the slots itself: the idle ones at once, the busy ones after their delivery, which it drains,
 * then cuts.
 * @module
 */
import { isTaskCancelledError, resource, spawn, withCleanupBudget } from "@keel/core";
import { deliver } from "./delivery.js";
import type { EngineJob } from "./engine.js";
import { isQueueClosedError } from "./errors.js";
import { Bound } from "./op.js";
import type { Pool, Slot } from "./pool.js";

/** Starts the slots of `pool`, in a resource of the caller's scope. */
export function* useSlots<T>(pool: Pool<T>): Generator<unknown, void, unknown> {
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
  const { engine, config } = pool;
  while (pool.taking) {
    let job: EngineJob<T>;
    s.idle = true;
    try {
      job = yield* engine.take();
    } catch (e) {
      if (isQueueClosedError(e)) return;
      throw e;
    } finally {
      s.idle = false;
    }
    // Nothing suspends between the take and this: a job taken is accounted for.
    const d = pool.begin(job);
    try {
      const attempts = job.attempts ?? config.attempts;
      d.task = yield* spawn(new Bound(deliver<T>, pool, d, attempts), {
        name: `${engine.name}/${job.id} attempt ${job.attempt}/${attempts}`,
      });
      yield* d.task;
    } catch (e) {
      // A delivery cut ends cancelled, its outcome settled: the slot goes on.
      if (!isTaskCancelledError(e)) throw e;
    } finally {
      // A delivery ends itself once settled; this is for one whose task ended before it began.
      pool.end(d);
    }
  }
}

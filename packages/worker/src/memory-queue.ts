/**
 * `createMemoryQueue`: the embedded engine, in the process's memory; everything in the worker's
 * contract except surviving a restart.
 * @module
 */
import { type Operation, resource, useClock } from "@keel/core";
import { checkKeys, checkObject, checkWhole, invalidType } from "./checks.js";
import { MemoryEngine } from "./memory-engine.js";
import { type Queue, queueOver } from "./queue.js";

/**
 * Creates an embedded job queue, closed when the caller's scope ends; jobs live in this process's
 * memory (use `useBullQueue` from `@keel/worker/bullmq` for jobs that must survive a restart or be
 * shared between processes).
 *
 * `capacity` bounds the jobs held (waiting, delayed and active): an `add` at capacity waits for room,
 * under every deadline above it. Delays run on the runtime's clock, so a virtual clock drives them.
 *
 * `deadLetterLimit` bounds the dead letters kept for `deadLetters()` (default 1,000: the newest;
 * each keeps its error objects, a few kB for an HTTP error): a worker that runs for months must not
 * grow with them. `counts().deadLettered` counts them all; give `useWorker` a `deadLetter` sink to
 * store each one durably.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createMemoryQueue, useWorker } from "@keel/worker";
 * const done: string[] = [];
 * await run(function* () {
 *   const queue = yield* createMemoryQueue<string>({ name: "mail", capacity: 100 });
 *   yield* queue.add("hello");
 *   yield* useWorker(queue, function* send(job) { done.push(job.data); }, { concurrency: 2 });
 *   while ((yield* queue.counts()).completed < 1) yield* queue.idle();
 * });
 * console.log(done); // ["hello"]
 * ```
 * @throws `TypeError` for a missing or empty `name`; `RangeError` for a `capacity` that is not a
 * whole number ≥ 1, or a `deadLetterLimit` that is not a whole number ≥ 0.
 */
export function createMemoryQueue<T>(options: {
  name: string;
  capacity?: number;
  deadLetterLimit?: number;
}): Operation<MemoryQueue<T>> {
  const o = checkObject("createMemoryQueue(options)", options);
  checkKeys("createMemoryQueue(options)", o, ["name", "capacity", "deadLetterLimit"]);
  if (typeof options.name !== "string" || options.name === "")
    throw invalidType("createMemoryQueue({ name })", "a non-empty string", options.name);
  const capacity =
    options.capacity === undefined
      ? Infinity
      : checkWhole("createMemoryQueue({ capacity })", options.capacity, 1);
  const deadLetterLimit =
    options.deadLetterLimit === undefined
      ? 1000
      : checkWhole("createMemoryQueue({ deadLetterLimit })", options.deadLetterLimit, 0);
  const name = options.name;
  return resource<MemoryQueue<T>>(
    function* memoryQueue(provide) {
      const engine = new MemoryEngine<T>(name, capacity, deadLetterLimit, yield* useClock());
      try {
        yield* provide({ ...queueOver(engine), idle: () => engine.idle() });
      } finally {
        engine.closeNow();
      }
    },
    { name: `queue ${name}` },
  );
}

/**
 * The embedded queue: a {@link Queue} plus `idle()`, which waits until the queue's records next
 * change (a job added, taken or ended), for tests and demos that watch it.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createMemoryQueue, type MemoryQueue } from "@keel/worker";
 * await run(function* () {
 *   const queue: MemoryQueue<number> = yield* createMemoryQueue<number>({ name: "n" });
 *   console.log(queue.name); // n
 * });
 * ```
 */
export interface MemoryQueue<T> extends Queue<T> {
  idle(): Operation<void>;
}

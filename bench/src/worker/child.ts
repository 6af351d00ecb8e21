/**
 * One sample of the worker benchmark: `kind` (worker | channel) runs `jobs` no-op jobs with
 * `concurrency`, and prints one JSON line.
 * @module
 */
import { action, all, createChannel, run, scoped } from "@keel/core";
import { createMemoryQueue, useWorker } from "@keel/worker";

const [kind, jobsArg, concurrencyArg] = process.argv.slice(2);
const jobs = Number(jobsArg);
const concurrency = Number(concurrencyArg);
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});

function* noop() {}

const result = await run(function* sample() {
  if (kind === "worker") {
    return yield* scoped(function* embedded() {
      const queue = yield* createMemoryQueue<number>({ name: "bench" });
      gc();
      const t0 = performance.now();
      for (let i = 0; i < jobs; i++) yield* queue.add(i);
      const addNsPerJob = ((performance.now() - t0) * 1e6) / jobs;
      const t1 = performance.now();
      // The handler counts, and the sample waits once for the last: a wait on every change of the
      // queue (`queue.idle()`) would wake this loop several times per job and time that too.
      let handled = 0;
      let allHandled: (() => void) | null = null;
      yield* useWorker(
        queue,
        function* counting() {
          if (++handled === jobs) allHandled?.();
        },
        { concurrency },
      );
      yield* action<void>((resolve) => {
        allHandled = resolve;
        if (handled === jobs) resolve();
        return () => {};
      });
      while ((yield* queue.counts()).completed < jobs) yield* queue.idle();
      const runMs = performance.now() - t1;
      gc();
      return { addNsPerJob, runMs, heapAfterMb: process.memoryUsage().heapUsed / 2 ** 20 };
    });
  }
  const channel = createChannel<number>({ capacity: jobs });
  gc();
  const t0 = performance.now();
  for (let i = 0; i < jobs; i++) yield* channel.send(i);
  channel.close();
  const addNsPerJob = ((performance.now() - t0) * 1e6) / jobs;
  const t1 = performance.now();
  // The loop users wrote by hand: `concurrency` consumers pulling from one channel.
  yield* all(
    Array.from(
      { length: concurrency },
      () =>
        function* consumer() {
          for (;;) {
            const next = yield* channel.next();
            if (next.done) return;
            yield* noop();
          }
        },
    ),
  );
  const runMs = performance.now() - t1;
  gc();
  return { addNsPerJob, runMs, heapAfterMb: process.memoryUsage().heapUsed / 2 ** 20 };
});
console.log(JSON.stringify(result));

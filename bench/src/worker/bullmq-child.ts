/**
 * One sample of the BullMQ worker benchmark: `kind` (keel | plain) runs `warmup` + `jobs` no-op jobs
 * with `concurrency` from the queue `bench` under `prefix` on the Redis at 127.0.0.1:6379, and prints
 * one JSON line. `keel` is `useWorker` over `useBullQueue`; `plain` is a BullMQ `Worker` with a no-op
 * processor. The parent added the jobs (a producer process of its own, as in a deployment, and the
 * same for both kinds: this process only consumes) and removes the keys after. Only the last `jobs`
 * are timed (from the `warmup`-th job handled, or the worker's start with no warm-up, to the last
 * completion); neither side polls Redis while it runs.
 * @module
 */
import { action, run } from "@keel/core";
import { useWorker } from "@keel/worker";
import { useBullQueue } from "@keel/worker/bullmq";
import { Worker } from "bullmq";

const [kind, jobsArg, concurrencyArg, warmupArg, prefixArg] = process.argv.slice(2);
const jobs = Number(jobsArg);
const concurrency = Number(concurrencyArg);
/**
 * Jobs run before the timed ones, in the same process and worker: without them, the timed run also
 * pays for V8 compiling the code each side runs per job, which a long-running worker pays once
 * (`--trace-opt`, cold run, from its 1,000th job to its 5,000th: 262 functions optimized in Keel's
 * process, 192 in the plain one's).
 */
const warmup = Number(warmupArg ?? 0);
const total = warmup + jobs;
const connection = { host: "127.0.0.1", port: 6379, maxRetriesPerRequest: null };
const prefix = prefixArg ?? `keel-bench-${process.pid}`;

/** A full GC before the run, so that garbage from starting up is not collected inside it. */
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});
let cpu0 = process.cpuUsage();
let cpu = cpu0;
let t1 = 0;
/** Starts the timed run: at the worker's start, or once the warm-up jobs are done. */
function startTimed(): void {
  t1 = performance.now();
  cpu0 = process.cpuUsage();
}
let handled = 0;
/** Resolved when the handler has run `total` times: the Keel sample learns of its end in process, as
 * the plain one does from its `completed` event, rather than by polling Redis (which would load it). */
let allHandled: (() => void) | null = null;
function* counting() {
  ++handled;
  if (handled === warmup) startTimed();
  if (handled === total) allHandled?.();
}

async function plain(): Promise<number> {
  const worker = new Worker("bench", async () => {}, { connection, prefix, concurrency, autorun: false });
  let done = 0;
  gc();
  if (warmup === 0) startTimed();
  const finished = new Promise<number>((resolve) => {
    worker.on("completed", () => {
      if (++done === warmup) startTimed();
      if (done === total) {
        cpu = process.cpuUsage(cpu0);
        resolve(performance.now() - t1);
      }
    });
  });
  void worker.run();
  const runMs = await finished;
  await worker.close();
  return runMs;
}

const runMs =
  kind === "plain"
    ? await plain()
    : await run(function* keel() {
        const queue = yield* useBullQueue<number>({ name: "bench", connection, prefix });
        gc();
        if (warmup === 0) startTimed();
        yield* useWorker(queue, counting, { concurrency });
        yield* action<void>((resolve) => {
          allHandled = resolve;
          if (handled === total) resolve();
          return () => {};
        });
        // The last few completions are one Redis call each behind their handler: ask Redis until
        // they have landed, back to back. (A 1 ms sleep between asks ended the sample 1-2 ms after
        // the last completion, about 0.5 % of a sample at concurrency 16, on this side only: the
        // plain one stops at its last `completed` event.)
        while ((yield* queue.counts()).completed < total);
        cpu = process.cpuUsage(cpu0);
        return performance.now() - t1;
      });
// This process's CPU time while it ran (user + system): what a loaded machine disturbs least.
console.log(JSON.stringify({ runMs, cpuMs: (cpu.user + cpu.system) / 1000 }));

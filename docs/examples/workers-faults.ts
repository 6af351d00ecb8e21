/**
 * Workers through failures (`@keel/worker`): an engine that stops answering (Redis gone or paused)
 * for a while, and for good; what the worker does and reports; and a handler that is safe to run
 * twice. The engine is the embedded one behind a switch, so that this runs on the virtual clock
 * without a Redis; the worker sees it as it would see BullMQ on a Redis that stopped answering.
 */
import assert from "node:assert/strict";
import { type Operation, sleep, suspend } from "@keel/core";
import { createHarness } from "@keel/testing";
import {
  createMemoryQueue,
  type EngineJob,
  isEngineUnavailableError,
  type Queue,
  type QueueEngine,
  useWorker,
  type WorkerStats,
} from "@keel/worker";

/**
 * `queue` behind a switch: while `down`, every call gets no answer (a paused Redis). A job the worker
 * gives up on (`forget`) goes back to wait once the engine answers again, with its attempt unspent:
 * what BullMQ's stalled check does once the job's lock has lapsed. (An idle BullMQ worker notices a
 * Redis that stopped answering at its take, whose fetch is bounded too; this switch shows it only
 * to a call the worker makes, so each scenario has a job running when the engine goes down.)
 */
function flaky<T>(queue: Queue<T>): { queue: Queue<T>; switch: { down: boolean } } {
  const inner = queue.engine;
  const state = { down: false };
  const forgotten: EngineJob<T>[] = [];
  function answer<R>(call: () => Operation<R>): Operation<R> {
    return {
      *[Symbol.iterator]() {
        if (state.down) yield* suspend(); // no answer: the worker's engineTimeoutMs cuts the wait
        for (const job of forgotten.splice(0)) yield* inner.release(job);
        return yield* call();
      },
    };
  }
  const engine: QueueEngine<T> = {
    name: inner.name,
    add: (data, options) => answer(() => inner.add(data, options)),
    take: () => answer(() => inner.take()),
    complete: (job) => answer(() => inner.complete(job)),
    retry: (job, failure) => answer(() => inner.retry(job, failure)),
    deadLetter: (job, letter) => answer(() => inner.deadLetter(job, letter)),
    release: (job) => answer(() => inner.release(job)),
    progress: (job, value) => answer(() => inner.progress(job, value)),
    counts: () => answer(() => inner.counts()),
    deadLetters: () => answer(() => inner.deadLetters()),
    close: () => answer(() => inner.close()),
    forget: (job) => void forgotten.push(job),
  };
  return { queue: { ...queue, engine }, switch: state };
}

// 1. The engine stops answering while a job runs, for 3 s. The job's completion gets no answer within
//    engineTimeoutMs: the engine is marked down (one `worker:engine` event, a warning by default), the
//    delivery ends `stalled`, and nothing is taken until a probe is answered. The job comes back and
//    runs again: its handler writes its effect once per job id, so the second run changes nothing.
{
  const h = createHarness();
  const ledger = new Map<string, number>(); // stands in for a table with a unique key on the job id
  let runs = 0;
  const stats: WorkerStats[] = [];
  await h.run(function* service() {
    const { queue, switch: redis } = flaky(yield* createMemoryQueue<{ cents: number }>({ name: "payouts" }));
    const worker = yield* useWorker(
      queue,
      function* payOut(job) {
        runs++;
        yield* sleep(100); // the payment provider, called with the job id as its idempotency key
        // INSERT … ON CONFLICT (job_id) DO NOTHING: a second run of the same job writes nothing.
        if (!ledger.has(job.id)) ledger.set(job.id, job.data.cents);
      },
      { engineTimeoutMs: 500, engineDownMs: 60_000 },
    );
    yield* queue.add({ cents: 1250 }, { id: "payout-7", ttlMs: 600_000 });
    yield* sleep(50);
    redis.down = true;
    h.mark("down");
    yield* sleep(1000);
    stats.push(yield* worker.stats());
    yield* sleep(2000);
    redis.down = false;
    h.mark("back");
    while ((yield* queue.counts()).completed < 1) yield* sleep(100);
    stats.push(yield* worker.stats());
  });
  assert.deepEqual(h.log, ["down@50", "back@3050"]);
  // The completion, asked at 100, has no answer by 600: stalled. A probe starts 500 ms
  // (min(1 s, engineTimeoutMs)) after the last one ended and is given 500 ms: those of 1100 and 2100
  // get no answer, the one of 3100 does.
  assert.deepEqual(
    h.eventsOf("worker:engine").map((e) => [e.state, e.at, e.downForMs]),
    [
      ["down", 600, undefined],
      ["up", 3100, 2500],
    ],
  );
  assert.deepEqual(
    h
      .eventsOf("worker:job")
      .map((e) => `${e.transition}${e.reason ? ` ${e.reason}` : ""} #${e.attempt}@${e.at}`),
    ["start #1@0", "stalled engine-down #1@600", "start #1@3100", "complete #1@3200"],
  );
  assert.deepEqual(
    stats.map((s) => [s.engine.state, s.stalled, s.completed]),
    [
      ["down", 1, 0],
      ["up", 1, 1],
    ],
  );
  assert.equal(runs, 2); // the job ran twice …
  assert.deepEqual([...ledger], [["payout-7", 1250]]); // … and paid once
  await h.expectClean();
}

// 2. The engine stays down past engineDownMs: the worker stops taking, shuts down (its close skipped:
//    the engine is known to be down) and fails its scope with EngineUnavailableError, whose cause is
//    the last failure the engine gave.
{
  const h = createHarness();
  const error = await h
    .run(function* service() {
      const { queue, switch: redis } = flaky(yield* createMemoryQueue<string>({ name: "mail" }));
      yield* useWorker(
        queue,
        function* send() {
          yield* sleep(200);
        },
        { engineTimeoutMs: 500, engineDownMs: 5_000 },
      );
      yield* queue.add("hello", { id: "m1", ttlMs: 60_000 });
      yield* sleep(100);
      redis.down = true;
      yield* suspend(); // serve until the worker fails
    })
    .catch((e: unknown) => e);
  assert.ok(isEngineUnavailableError(error));
  assert.match(
    (error as Error).message,
    /^queue mail: the engine did not answer for \d+ ms \(engineDownMs\)/,
  );
  // Down at 700 (the completion, asked at 200, got no answer); a probe fails every 1,000 ms (500 ms
  // apart, 500 ms each), and the one that fails at 5700 finds the engine down for 5,000 ms.
  assert.deepEqual(
    h.eventsOf("worker:engine").map((e) => [e.state, e.at]),
    [["down", 700]],
  );
  assert.deepEqual(
    h.eventsOf("worker:shutdown").map((e) => [e.phase, e.at]),
    [
      ["stop", 5700],
      ["drained", 5700],
      ["close-timeout", 5700],
    ],
  );
  await h.expectClean();
}

/**
 * One sample of the parked-executions row (issue 25: "a parked execution costs the worker
 * nothing"): `count` executions of a workflow that sleeps for an hour, each started, run to its
 * sleep and parked by one engine; the heap after a full GC before and after, in one JSON line.
 *
 * `kind`:
 * - `sqlite`: the engine on the SQLite store (a file in the parent's temporary folder): the rows
 *   are on the disk, so the heap's growth is what the engine and the runtime keep per parked
 *   execution. `synchronous: "normal"` only to start 100,000 executions in reasonable time (no
 *   fsync per commit); it changes nothing in the heap.
 * - `memory`: the engine on the memory store: the rows are in the heap, so this growth is the
 *   store's rows plus the engine's retention.
 * - `memory-store`: the same rows written straight into a memory store (create, claim, append the
 *   sleep's entry, park: what the engine does for each), with no engine: the store's own share.
 *   The engine's retention on the memory store is `memory` less `memory-store`.
 *
 * Before the measured part, `warmup` executions go the same way (code compiled, maps and pools
 * at their working size); the "before" heap is taken after them.
 * @module
 */
import { run, sleep, until } from "@keel/core";
import {
  createMemoryStore,
  sleepFor,
  startWorkflowEngine,
  type WorkflowStore,
  workflow,
} from "@keel/workflow";
import { createSqliteStore } from "@keel/workflow/sqlite";

const [kind, countArg, warmupArg, path] = process.argv.slice(2);
const count = Number(countArg);
const warmup = Number(warmupArg);
const HOUR = 3_600_000;

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with node --expose-gc");
/** The heap after full GCs (twice: weak references cleared by the first are collected by the second). */
const heap = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

const sleeper = workflow("sleeper", function* sleeper() {
  yield* sleepFor(HOUR);
});

/** The memory store's rows alone: what the engine writes for each parked execution, without it. */
async function storeOnly(): Promise<{ before: number; after: number }> {
  const store = createMemoryStore();
  const now = Date.now();
  const one = async (id: string) => {
    await store.create({ id, workflow: "sleeper", version: 1, input: null, deadlineAt: null, nowMs: now });
    const [c] = await store.claim("bench", now, 30_000, 1);
    const lease = { owner: "bench", generation: c!.record.generation };
    await store.append(id, lease, [
      {
        key: "sleep:#1",
        kind: "sleep",
        ok: true,
        value: { wakeAt: now + HOUR },
        error: null,
        attempts: 0,
        startedAt: now,
        endedAt: now,
      },
    ]);
    await store.park(id, lease, {
      status: "sleeping",
      wakeAt: now + HOUR,
      waitingFor: [],
      waitingOn: `sleep until ${new Date(now + HOUR).toISOString()}`,
      signalsSeen: 0,
      nowMs: now,
    });
  };
  for (let i = 0; i < warmup; i++) await one(`warm-${i}`);
  const before = heap();
  for (let i = 0; i < count; i++) await one(`parked-${i}`);
  return { before, after: heap() };
}

async function withEngine(store: WorkflowStore): Promise<{ before: number; after: number; running: number }> {
  let parks = 0;
  const park = store.park.bind(store);
  store.park = async (...args) => {
    await park(...args);
    parks++;
  };
  return run(function* parkedSample() {
    const engine = yield* startWorkflowEngine({ store, workflows: [sleeper], concurrency: 64, pollMs: 50 });
    const startAll = function* (prefix: string, n: number) {
      const target = parks + n;
      for (let i = 0; i < n; i++) yield* engine.start(sleeper, null, { id: `${prefix}-${i}` });
      while (parks < target) yield* sleep(20);
      // The last parks' tasks end after their write: let them.
      while (engine.running > 0) yield* sleep(20);
    };
    yield* startAll("warm", warmup);
    const before = heap();
    yield* startAll("parked", count);
    const after = heap();
    const running = engine.running;
    yield* until(Promise.resolve());
    return { before, after, running };
  });
}

let result: { before: number; after: number; running?: number };
if (kind === "memory-store") result = await storeOnly();
else if (kind === "memory") result = await withEngine(createMemoryStore());
else if (kind === "sqlite") {
  if (!path) throw new Error("sqlite: a file path");
  result = await withEngine(createSqliteStore({ path, synchronous: "normal" }));
} else throw new RangeError(`kind: expected sqlite, memory or memory-store, got ${kind}`);
console.log(JSON.stringify({ kind, count, warmup, ...result, rss: process.memoryUsage().rss }));

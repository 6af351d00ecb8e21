/**
 * Reading the task tree: what each task waits on (a sleep and when it wakes, a semaphore and the
 * place in its queue, a join), and a task cancelled but still unwinding. Virtual clock: exact times.
 */
import assert from "node:assert/strict";
import { createSemaphore, formatTaskTree, run, sleep, snapshot, spawn, suspend } from "@keel/core";
import { createVirtualClock } from "@keel/testing";

const clock = createVirtualClock({ autojump: false });
const warnings: (string | null)[] = [];
const db = createSemaphore(1, { name: "db" });
const root = run(
  function* server() {
    yield* spawn(function* holder() {
      yield* db.use(() => sleep(5000));
    });
    yield* spawn(function* query() {
      yield* db.use(() => sleep(10));
    });
    const flusher = yield* spawn(function* flusher() {
      try {
        yield* suspend();
      } finally {
        yield* sleep(60_000); // a cleanup that will not finish in its budget
      }
    });
    yield* sleep(100);
    flusher.cancel("draining");
    yield* suspend();
  },
  // The flusher's cleanup overruns its budget when the root is stopped: a warning, kept here.
  { clock, cleanupBudgetMs: 5000, logger: (r) => warnings.push(r.event) },
);
const turn = () => new Promise((resolve) => setImmediate(resolve));
await turn();
clock.advance(100);
await turn();
clock.advance(1400);

const tree = formatTaskTree(snapshot(root));
console.log(tree);
assert.match(tree, /^server#\d+ running 1\.5s, waiting on suspend\(\) for 1\.4s$/m);
assert.match(tree, /^ {2}holder#\d+ running 1\.5s, waiting on sleep\(5000\) for 1\.5s, wakes in 3\.5s$/m);
assert.match(
  tree,
  /^ {2}query#\d+ running 1\.5s, waiting on semaphore db: 1 waiting for 1\.5s, 1st in the queue$/m,
);
assert.match(
  tree,
  /^ {2}flusher#\d+ cancelling 1\.5s, deadline in 3\.6s, waiting on sleep\(60000\) for 1\.4s, wakes in 58\.6s, unwinding for 1\.4s \(cancel: draining\), cut in 3\.6s$/m,
);

const stopped = root.cancel();
await turn();
clock.advance(5000);
await stopped;
assert.deepEqual(warnings, ["cleanup:overrun"]);
console.log("diagnosis: ok");

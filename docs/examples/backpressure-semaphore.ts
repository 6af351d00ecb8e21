/**
 * A semaphore caps how many tasks use something at once. A permit comes back only when its holder has
 * really stopped (after its cleanup and its children), it is handed straight to the first waiter, and
 * a permit from `acquire()` belongs to the caller's scope, so it cannot be stranded.
 */
import assert from "node:assert/strict";
import {
  all,
  createSemaphore,
  formatTaskTree,
  run,
  scoped,
  sleep,
  snapshot,
  spawn,
  suspend,
  type Task,
} from "@keel/core";
import { createVirtualClock } from "@keel/testing";

// 1. Released after cleanup. A holds the only permit and is cancelled at 100; its `finally` needs
//    30 ms to close a connection. B, waiting since 10, gets the permit at 130, not at 100: while A is
//    still cleaning up, the resource is still A's. While B waits, the task tree says on what.
{
  const clock = createVirtualClock();
  const db = createSemaphore(1, { name: "db" });
  const log: string[] = [];
  const mark = (s: string) => log.push(`${s}@${clock.now()}`);
  let tree = "";
  const app: Task<void> = run(
    function* server() {
      const a = yield* spawn(function* requestA() {
        yield* db.use(function* holdConnection() {
          try {
            yield* suspend();
          } finally {
            yield* sleep(30); // closing the connection
            mark("A cleaned up");
          }
        });
      });
      yield* sleep(10);
      const b = yield* spawn(function* requestB() {
        yield* db.use(function* holdConnection() {
          mark(`B holds it (available ${db.available})`);
          yield* sleep(10);
        });
      });
      yield* sleep(1);
      tree = formatTaskTree(snapshot(app));
      mark(`waiting ${db.waiting}`);
      yield* sleep(89);
      yield* a.cancel();
      yield* b;
      mark(`available ${db.available}`);
    },
    { clock },
  );
  await app;
  console.log(tree);
  console.log(log.join("\n"));
  assert.match(tree, /requestB#\d+ running 1ms, waiting on semaphore db: 1 waiting/);
  assert.deepEqual(log, [
    "waiting 1@11",
    "A cleaned up@130",
    "B holds it (available 0)@130",
    "available 1@140",
  ]);
}

// 2. The permit also waits for the holder's children: the holder returns at 50, its child needs until
//    75 to unwind, and the next task gets the permit at 75.
{
  const clock = createVirtualClock();
  const sem = createSemaphore(1);
  const log: string[] = [];
  await run(
    () =>
      all([
        () =>
          sem.use(function* holder() {
            yield* spawn(function* child() {
              try {
                yield* suspend();
              } finally {
                yield* sleep(25);
                log.push(`child unwound@${clock.now()}`);
              }
            });
            yield* sleep(50);
            log.push(`holder returns@${clock.now()}`);
          }),
        function* next() {
          yield* sleep(1);
          yield* sem.use(function* () {
            log.push(`next holds it@${clock.now()}`);
          });
        },
      ]),
    { clock },
  );
  assert.deepEqual(log, ["holder returns@50", "child unwound@75", "next holds it@75"]);
  console.log(log.join(", "));
}

// 3. FIFO hand-off. A releases at 100 with B and C waiting: the permit goes straight to B, so right
//    after the release `available` is still 0, and A's next `use` queues behind C.
{
  const clock = createVirtualClock();
  const sem = createSemaphore(1);
  const grants: string[] = [];
  let availableAfterRelease = -1;
  await run(
    () =>
      all([
        function* A() {
          yield* sem.use(sleep(100));
          availableAfterRelease = sem.available;
          yield* sem.use(function* () {
            grants.push(`A again@${clock.now()}`);
            yield* sleep(100);
          });
        },
        function* B() {
          yield* sleep(10);
          yield* sem.use(function* () {
            grants.push(`B@${clock.now()}`);
            yield* sleep(100);
          });
        },
        function* C() {
          yield* sleep(20);
          yield* sem.use(function* () {
            grants.push(`C@${clock.now()}`);
            yield* sleep(100);
          });
        },
      ]),
    { clock },
  );
  assert.equal(availableAfterRelease, 0);
  assert.deepEqual(grants, ["B@100", "C@200", "A again@300"]);
  console.log(`grants in arrival order: ${grants.join(", ")}`);
}

// 4. `acquire()` gives a permit owned by the caller's current scope: it comes back when that scope
//    ends, even if nobody calls `release()`. `release()` gives it back early, and a second call is a
//    no-op, so `available` never exceeds the permit count.
{
  const clock = createVirtualClock();
  const sem = createSemaphore(1);
  const seen: string[] = [];
  await run(
    function* job() {
      yield* scoped(function* batch() {
        yield* sem.acquire();
        seen.push(`inside the block: available ${sem.available}`);
        yield* sleep(50);
      });
      seen.push(`after the block: available ${sem.available}`);

      const escaped = yield* scoped(() => sem.acquire());
      seen.push(`permit returned out of its scope: available ${sem.available}`);
      escaped.release(); // already released: nothing happens

      const early = yield* sem.acquire();
      early.release();
      early.release();
      seen.push(`released early, twice: available ${sem.available}`);
    },
    { clock },
  );
  console.log(seen.join("\n"));
  assert.deepEqual(seen, [
    "inside the block: available 0",
    "after the block: available 1",
    "permit returned out of its scope: available 1",
    "released early, twice: available 1",
  ]);
}

// 5. A cancelled waiter leaves the queue at once, and its body never runs.
{
  const clock = createVirtualClock();
  const sem = createSemaphore(1);
  let ran = false;
  const counts: number[] = [];
  await run(
    function* main() {
      const holder = yield* spawn(() => sem.use(sleep(100)));
      const waiter = yield* spawn(function* waiter() {
        yield* sem.use(function* never() {
          ran = true;
        });
      });
      yield* sleep(20);
      counts.push(sem.waiting);
      yield* waiter.cancel();
      counts.push(sem.waiting);
      yield* holder;
    },
    { clock },
  );
  assert.deepEqual(counts, [1, 0]);
  assert.equal(ran, false);
  assert.equal(sem.available, 1);
  console.log(`waiting before and after the cancel: ${counts.join(" → ")}`);
}
console.log("backpressure-semaphore: ok");

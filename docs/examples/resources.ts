/**
 * Resources outlive the tasks of their scope: when a scope exits, its task children are cancelled
 * and awaited first; then its resources are torn down one at a time, newest first, each within the
 * cleanup budget. So a `finally` (or a shield) in any task of the scope can still use them.
 */
import assert from "node:assert/strict";
import { type Operation, resource, sleep, spawn, suspend, withCleanupBudget } from "@keel/core";
import { createHarness, type Harness } from "@keel/testing";

/** A connection-like resource that refuses use once closed; its close takes 5 ms. */
function connect(h: Harness, name: string, uses?: { send(m: string): void }) {
  return resource<{ send(m: string): void }>(
    function* (provide) {
      let open = true;
      try {
        yield* provide({
          send(m) {
            assert.ok(open, `${name} used after close`);
            h.mark(`${name} <- ${m}`);
          },
        });
      } finally {
        uses?.send(`${name} closing`); // a resource may use the one it was built on
        yield* sleep(5);
        open = false;
        h.mark(`${name} closed`);
      }
    },
    { name },
  );
}

// 1. A service: a queue connection, a worker built on it, handlers spawned before and after.
//    Cancelled at 100: the handlers' finally blocks run with both resources open, then the worker
//    closes (using the queue), then the queue.
{
  const h = createHarness();
  function* handler(id: number, queue: { send(m: string): void }): Operation<void> {
    try {
      yield* suspend();
    } finally {
      yield* sleep(10);
      queue.send(`requeue job ${id}`);
    }
  }
  const service = h.run(function* service() {
    const queue = yield* connect(h, "queue");
    yield* spawn(() => handler(1, queue));
    const worker = yield* connect(h, "worker", queue);
    yield* spawn(() => handler(2, worker));
    yield* suspend();
  });
  await h.run(function* operator() {
    yield* sleep(100);
    yield* service.cancel();
  });
  assert.deepEqual(h.log, [
    "queue <- requeue job 1@110",
    "worker <- requeue job 2@110",
    "queue <- worker closing@110",
    "worker closed@115",
    "queue closed@120",
  ]);
  await h.expectClean();
}

// 2. Each teardown has the cleanup budget: a close that hangs is cut, and the older resources
//    still close after it.
{
  const h = createHarness();
  await h.run(() =>
    withCleanupBudget(50, function* service() {
      yield* connect(h, "db");
      yield* resource<void>(
        function* (provide) {
          try {
            yield* provide(undefined);
          } finally {
            yield* suspend(); // a goodbye that is never answered
          }
        },
        { name: "stuck" },
      );
    }),
  );
  assert.deepEqual(h.log, ["db closed@55"]);
  assert.equal(h.eventsOf("cleanup:overrun").length, 1);
  await h.expectClean();
}
console.log("resources: ok");

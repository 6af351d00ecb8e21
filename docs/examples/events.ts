/**
 * Observability: every start, settle, cancellation request, timeout scope (start, firing, end), overrun, swallow,
 * abandonment and shield delay is an event; `snapshot` and `formatTaskTree` show the live tree.
 */
import assert from "node:assert/strict";
import {
  formatTaskTree,
  type KeelEvent,
  run,
  sleep,
  snapshot,
  spawn,
  suspend,
  type Task,
  timeout,
} from "@keel/core";
import { createVirtualClock } from "@keel/testing";

// 1. onEvent receives every event of the tree, each with its time, task id and path.
{
  const clock = createVirtualClock();
  const events: KeelEvent[] = [];
  const task = run(
    function* handler() {
      yield* timeout(100, function* lookup() {
        yield* sleep(1000);
      });
    },
    { clock, onEvent: (e) => events.push(e) },
  );
  await Promise.resolve(task).catch(() => {});
  const lines = events.map((e) => `${e.at} ${e.type} ${e.path.replace(/#\d+/g, "")}`);
  assert.deepEqual(lines, [
    "0 task:start handler",
    "0 timeout:start handler",
    "100 timeout:fire handler",
    "100 cancel:request handler",
    "100 timeout:end handler",
    "100 task:settle handler",
  ]);
  const fire = events.find((e) => e.type === "timeout:fire");
  assert.equal(fire?.type === "timeout:fire" && fire.scope.label, "timeout(100)");
  // The scope's end says its timer fired and it threw its own TimeoutError.
  const end = events.find((e) => e.type === "timeout:end");
  assert.ok(end?.type === "timeout:end" && end.fired && end.outcome === "timed-out");
}

// 2. A snapshot of the live tree: names, states, ages, deadlines left, what each task waits on.
{
  const clock = createVirtualClock();
  let tree = "";
  let printed!: () => void;
  const done = new Promise<void>((resolve) => {
    printed = resolve;
  });
  const app: Task<void> = run(
    function* server() {
      yield* spawn(function* poller() {
        for (;;) yield* sleep(1000);
      });
      yield* spawn(() =>
        timeout(5000, function* request() {
          yield* suspend();
        }),
      );
      yield* spawn(function* inspector() {
        yield* sleep(1500);
        tree = formatTaskTree(snapshot(app));
        printed();
      });
      yield* suspend();
    },
    { clock, onEvent: () => {} },
  );
  await Promise.race([done, app]);
  console.log(tree);
  const lines = tree.replace(/#\d+/g, "#N").split("\n");
  assert.deepEqual(lines, [
    "server#N running 1.5s, waiting on suspend() for 1.5s",
    "  poller#N running 1.5s, waiting on sleep(1000) for 500ms, wakes in 500ms",
    "  task#N running 1.5s, deadline in 3.5s, waiting on suspend() for 1.5s",
    "  inspector#N running 1.5s",
  ]);
  await app.cancel();
}
console.log("events: ok");

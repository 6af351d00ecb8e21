/**
 * Bounded cleanup: once cancellation is delivered, `finally` blocks may suspend for up to the
 * cleanup budget; then the pending step is cut; a task that keeps swallowing is abandoned.
 * Every overrun, swallow and abandonment is an event.
 */
import assert from "node:assert/strict";
import {
  deadline,
  isCancelled,
  race,
  remaining,
  scoped,
  sleep,
  spawn,
  suspend,
  withCleanupBudget,
} from "@keel/core";
import { createHarness } from "@keel/testing";

// 1. Within the budget, cleanup is ordinary code: suspension points work, deadlines read the
//    cleanup deadline (cancelled at 10 + default budget 5000 = 5010).
{
  const h = createHarness();
  const task = h.run(function* worker() {
    try {
      yield* suspend();
    } finally {
      yield* sleep(10); // flush, close, say goodbye
      h.mark(`flushed; cleanup deadline ${yield* deadline()}, ${yield* remaining()} ms left`);
    }
  });
  await h.run(function* operator() {
    yield* sleep(10);
    yield* task.cancel();
  });
  assert.deepEqual(h.log, ["flushed; cleanup deadline 5010, 4990 ms left@20"]);
  await h.expectClean();
}

// 2. A cleanup step that never finishes is cut when the budget runs out: Cancelled (reason
//    "cleanup-overrun") is thrown into it; outer finally blocks still run.
{
  const h = createHarness();
  const task = h.run(() =>
    withCleanupBudget(200, function* worker() {
      try {
        try {
          yield* suspend();
        } finally {
          yield* suspend(); // a goodbye that is never answered
          h.mark("never");
        }
      } catch (e) {
        if (isCancelled(e)) h.mark(`cut: ${e.reason.kind}`);
        throw e;
      } finally {
        h.mark("outer finally still runs");
      }
    }),
  );
  await h.run(function* operator() {
    yield* sleep(10);
    yield* task.cancel();
  });
  assert.deepEqual(h.log, ["cut: cleanup-overrun@210", "outer finally still runs@210"]);
  assert.equal(task.state, "cancelled");
  const [overrun] = h.eventsOf("cleanup:overrun");
  assert.equal(overrun?.budgetMs, 200);
  assert.equal(overrun?.waitingOn, "suspend()");
  await h.expectClean();
}

// 3. After the cut every suspension point throws at once. A task that swallows again and again is
//    abandoned (at the latest one more budget after the cut): never resumed, settled as cancelled.
{
  const h = createHarness();
  const task = h.run(() =>
    withCleanupBudget(200, function* unkillable() {
      try {
        yield* suspend();
      } finally {
        for (;;) {
          try {
            yield* sleep(10);
          } catch {
            // swallowing every signal: don't write this
          }
        }
      }
    }),
  );
  await h.run(function* operator() {
    yield* sleep(10);
    yield* task.cancel();
  });
  assert.equal(task.state, "cancelled");
  assert.ok(h.clock.now() <= 410, `abandoned by ${h.clock.now()}`);
  assert.equal(h.eventsOf("cleanup:overrun").length, 1);
  assert.equal(h.eventsOf("cleanup:abandon").length, 1);
  await h.expectClean();
}

// 4. Without an onEvent listener, overruns, swallows and abandonments are console warnings; with
//    one (the harness installs one), they are events. Either way nothing is silent.
{
  const h = createHarness();
  const task = h.run(function* swallower() {
    try {
      yield* suspend();
    } catch {
      // the catch-all that also catches Cancelled
    }
    return "value";
  });
  await h.run(function* operator() {
    yield* sleep(10);
    yield* task.cancel();
  });
  assert.equal(task.state, "cancelled"); // the value is dropped
  const [swallow] = h.eventsOf("cleanup:swallow");
  assert.equal(swallow?.reason.kind, "cancel");
  await h.expectClean();
}
// The budget counts from the request: the root is cancelled at 20 while its race awaits a loser
// whose cleanup takes two budgets (its own child's cleanup hangs too). The root's own cleanup is
// cut as soon as it runs, at 2 B; it is not given a third budget.
{
  const h = createHarness();
  const B = 200;
  function* hungCleanup() {
    try {
      yield* suspend();
    } finally {
      yield* suspend();
    }
  }
  const task = h.run(
    function* root() {
      try {
        yield* race([
          function* winner() {
            yield* sleep(10);
          },
          function* loser() {
            try {
              yield* suspend();
            } finally {
              yield* scoped(function* drain() {
                yield* spawn(hungCleanup);
                yield* suspend();
              });
            }
          },
        ]);
      } finally {
        yield* suspend();
      }
    },
    { cleanupBudgetMs: B },
  );
  await h.run(function* operator() {
    yield* sleep(20);
    yield* task.cancel();
    h.mark("settled");
  });
  assert.deepEqual(h.log, [`settled@${10 + 2 * B}`]);
  await h.expectClean();
}
console.log("cleanup: ok");

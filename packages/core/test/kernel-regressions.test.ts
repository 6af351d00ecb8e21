import { all, sleep } from "@keel/core";
import { createHarness } from "@keel/testing";
import { describe, expect, it } from "vitest";

describe("kernel regressions found by the property tests", () => {
  it("a cleanup budget that runs out while the task waits for its children cuts its own cleanup after", async () => {
    const h = createHarness();
    const t = h.run(
      function* root() {
        try {
          yield* all([
            function* child() {
              try {
                yield* sleep(0);
              } finally {
                h.mark("child.fin");
                yield* sleep(150);
                h.mark("child.done");
              }
            },
          ]);
        } finally {
          h.mark("root.fin");
          yield* sleep(150);
          h.mark("root.done");
        }
      },
      { cleanupBudgetMs: 100 },
    );
    h.clock.schedule(0, () => {
      t.cancel();
    });
    await expect(t).rejects.toMatchObject({ name: "TaskCancelledError" });
    // The whole subtree is bounded by one budget: the root's own finally is cut at once at 100.
    expect(h.log).toEqual(["child.fin@0", "root.fin@100"]);
    expect(h.eventsOf("cleanup:overrun").map((e) => [e.path, e.at])).toEqual([
      [`root#${t.id}/child#${t.id + 1}`, 100],
      [`root#${t.id}`, 100],
    ]);
    await h.expectClean();
  });
});

describe("retry with a zero backoff", () => {
  it("retries without a timer when attempts are bounded: every attempt at the same instant, no timer used", async () => {
    const { constant, retry } = await import("@keel/core");
    const h = createHarness();
    const schedule = h.clock.schedule.bind(h.clock);
    let scheduled = 0;
    h.clock.schedule = (at, fn) => {
      scheduled++;
      return schedule(at, fn);
    };
    const starts: number[] = [];
    const t = h.run(() =>
      retry(
        function* flaky() {
          starts.push(h.clock.now());
          throw Object.assign(new Error("busy"), { status: 503 });
        },
        { attempts: 3, backoff: constant(0) },
      ),
    );
    await expect(t).rejects.toMatchObject({ name: "RetryExhaustedError", reason: "attempts", attempts: 3 });
    expect(starts).toEqual([0, 0, 0]);
    expect(scheduled).toBe(0);
    await h.expectClean();
  });

  it("still yields between attempts when they are unbounded, so a cancellation from outside can arrive", async () => {
    // Real clock, on purpose: a loop that never yielded would never let a host callback run.
    const { constant, retry, run } = await import("@keel/core");
    let attempts = 0;
    const t = run(() =>
      retry(
        function* flaky() {
          attempts++;
          throw Object.assign(new Error("busy"), { status: 503 });
        },
        { attempts: Infinity, backoff: constant(0) },
      ),
    );
    // A host callback that cancels once a few attempts have run: it gets to run at all only if the
    // loop yields to the event loop (a loop that never did would hang this test). Polled on
    // setImmediate rather than on a timer, so a busy machine cannot make it arrive after attempt 1.
    const cancelAfterSomeAttempts = () => {
      if (attempts >= 3) t.cancel("enough");
      else setImmediate(cancelAfterSomeAttempts);
    };
    setImmediate(cancelAfterSomeAttempts);
    await expect(t).rejects.toMatchObject({ name: "TaskCancelledError" });
    expect(attempts).toBeGreaterThanOrEqual(3);
  });
});

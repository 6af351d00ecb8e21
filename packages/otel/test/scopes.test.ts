import { constant, retry, run, sleep, spawn, suspend, timeout, timeoutAt } from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { idOf, only, parentOf, tree, useOtel } from "./support/otel.js";

const otel = useOtel();

describe("@keel/otel: timeout scopes", () => {
  it("a span per timeout scope under the task, with owner, budget, deadline left, fired and outcome", async () => {
    const clock = createVirtualClock();
    await run(
      function* checkout() {
        try {
          yield* timeout(500, function* () {
            yield* sleep(100);
            yield* timeout(1000, sleep(600), { label: "stock" });
          });
        } catch {}
        yield* timeoutAt(clock.now() + 50, sleep(5), { label: "sync" });
        try {
          yield* timeoutAt(clock.now() + 5, sleep(50));
        } catch {}
      },
      { clock },
    );
    const spans = otel.spans();
    const root = only(spans, "checkout");
    expect(tree(spans, root)).toEqual([
      "checkout",
      "  timeout(500)",
      "    timeout(1000, stock)",
      "  timeoutAt(sync)",
      "  timeoutAt",
    ]);
    const outer = only(spans, "timeout(500)");
    expect(outer.attributes).toMatchObject({
      "keel.timeout.owner": "timeout(500)",
      "keel.timeout.ms": 500,
      "keel.deadline.left_ms": 500,
      "keel.timeout.fired": true,
      "keel.timeout.outcome": "timed-out",
    });
    expect(outer.status).toMatchObject({ code: 2, message: "timeout(500): timed out after 500 ms" });
    // The inner one's own budget is 1000 ms, but only 400 were left of the outer deadline; the outer
    // fired, so the inner ended cancelled, not timed out.
    const inner = only(spans, "timeout(1000, stock)");
    expect(inner.attributes).toMatchObject({
      "keel.timeout.ms": 1000,
      "keel.deadline.left_ms": 400,
      "keel.timeout.fired": false,
      "keel.timeout.outcome": "cancelled",
    });
    expect(inner.events.map((e) => e.name)).toEqual(["keel.cancel"]);
    expect(inner.events[0]!.attributes).toMatchObject({ "keel.cancel.owner": "timeout(500)" });
    const sync = only(spans, "timeoutAt(sync)");
    expect(sync.attributes["keel.timeout.owner"]).toMatch(/^timeoutAt\(\d+, sync\)$/);
    expect(sync.attributes).toMatchObject({
      "keel.timeout.fired": false,
      "keel.timeout.outcome": "completed",
    });
    // The timeouts metric names a timeoutAt without its instant: one series, however many deadlines.
    const fired = (await otel.metricPoints()).get("keel.timeouts")!;
    expect(fired.map((p) => [p.attributes["keel.timeout.owner"], p.value])).toEqual([
      ["timeout(500)", 1],
      ["timeoutAt", 1],
    ]);
  });

  it("a task spawned inside a timeout scope hangs from the scope's span", async () => {
    await run(
      function* handler() {
        yield* timeout(100, function* () {
          const t = yield* spawn(function* lookup() {
            yield* sleep(5);
          });
          yield* t;
        });
      },
      { clock: createVirtualClock() },
    );
    const spans = otel.spans();
    expect(tree(spans, only(spans, "handler"))).toEqual(["handler", "  timeout(100)", "    lookup"]);
  });
});

describe("@keel/otel: retry scopes", () => {
  it("a retry span, a span per attempt (k of N), its budget and per-attempt timeouts on them", async () => {
    let calls = 0;
    await run(
      function* pay() {
        yield* timeout(5000, function* () {
          yield* retry(
            function* charge() {
              yield* sleep(++calls === 1 ? 500 : 10);
            },
            { attempts: 3, budgetMs: 1000, perAttemptMs: 100, backoff: constant(5), retryOn: () => true },
          );
        });
      },
      { clock: createVirtualClock() },
    );
    const spans = otel.spans();
    expect(tree(spans, only(spans, "pay"))).toEqual([
      "pay",
      "  timeout(5000)",
      "    retry(charge)",
      "      retry(charge) attempt 1",
      "      retry(charge) attempt 2",
    ]);
    const scope = only(spans, "retry(charge)");
    expect(scope.attributes).toMatchObject({
      "keel.retry.label": "retry(charge)",
      "keel.retry.attempts": 3,
      "keel.retry.budget_ms": 1000,
      "keel.retry.per_attempt_ms": 100,
      "keel.retry.outcome": "success",
      // The budget is the retry's own timeout: on its span, tighter than the enclosing 5000 ms.
      "keel.timeout.owner": "retry(charge) budget 1000 ms",
      "keel.timeout.fired": false,
      "keel.timeout.outcome": "completed",
      "keel.deadline.left_ms": 1000,
    });
    expect(scope.events.map((e) => [e.name, e.attributes?.["keel.retry.delay_ms"]])).toEqual([
      ["keel.retry", 5],
    ]);
    const [first, second] = [only(spans, "retry(charge) attempt 1"), only(spans, "retry(charge) attempt 2")];
    expect(first.attributes).toMatchObject({
      "keel.retry.attempt": 1,
      "keel.retry.attempts": 3,
      "keel.timeout.owner": "retry(charge) attempt 1",
      "keel.timeout.ms": 100,
      "keel.timeout.fired": true,
      "keel.timeout.outcome": "timed-out",
      "keel.deadline.left_ms": 100,
    });
    expect(first.status).toMatchObject({
      code: 2,
      message: "retry(charge) attempt 1: timed out after 100 ms",
    });
    expect(second.attributes).toMatchObject({ "keel.retry.attempt": 2, "keel.timeout.fired": false });
    expect(second.status.code).toBe(0);
  });

  it("a retry that gives up ends in error with its reason", async () => {
    await run(
      function* pay() {
        try {
          yield* retry(
            function* charge() {
              throw new Error("declined");
            },
            { attempts: 2, backoff: constant(1), retryOn: () => true },
          );
        } catch {}
      },
      { clock: createVirtualClock() },
    );
    const scope = only(otel.spans(), "retry(charge)");
    expect(scope.attributes).toMatchObject({
      "keel.retry.giveup": "attempts",
      "keel.retry.outcome": "giveup",
    });
    expect(scope.status).toMatchObject({ code: 2 });
    expect(scope.status.message).toMatch(/all 2 attempts failed/);
  });

  it("a retry whose budget runs out: its span says the budget fired, the cut attempt in error", async () => {
    await run(
      function* pay() {
        try {
          yield* retry(
            function* slow() {
              yield* sleep(100);
              throw new Error("late");
            },
            { attempts: 5, budgetMs: 150, backoff: constant(1), retryOn: () => true },
          );
        } catch {}
      },
      { clock: createVirtualClock() },
    );
    const spans = otel.spans();
    expect(tree(spans, only(spans, "pay"))).toEqual([
      "pay",
      "  retry(slow)",
      "    retry(slow) attempt 1",
      "    retry(slow) attempt 2",
    ]);
    expect(only(spans, "retry(slow)").attributes).toMatchObject({
      "keel.timeout.owner": "retry(slow) budget 150 ms",
      "keel.timeout.fired": true,
      "keel.timeout.outcome": "timed-out",
      "keel.retry.giveup": "budget",
      "keel.retry.outcome": "giveup",
    });
    const cut = only(spans, "retry(slow) attempt 2");
    expect(cut.status).toMatchObject({
      code: 2,
      message: "retry(slow) budget 150 ms: timed out after 150 ms",
    });
    expect(cut.attributes["keel.deadline.left_ms"]).toBe(49);
  });

  it("a retry cut by a timeout ends with it, and what the task does next is not parented by it", async () => {
    await run(
      function* worker() {
        try {
          yield* timeout(5, retry(suspend, { attempts: 3 }));
        } catch {}
        const t = yield* spawn(function* after() {
          yield* sleep(1);
        });
        yield* t;
      },
      { clock: createVirtualClock() },
    );
    const spans = otel.spans();
    const root = only(spans, "worker");
    expect(tree(spans, root)).toEqual([
      "worker",
      "  timeout(5)",
      "    retry(suspend)",
      "      retry(suspend) attempt 1",
      "  after",
    ]);
    const scope = only(spans, "retry(suspend)");
    expect(scope.attributes["keel.retry.outcome"]).toBe("cancelled");
    expect(scope.status.code).toBe(0);
    expect(parentOf(only(spans, "after"))).toBe(idOf(root));
  });
});

describe("@keel/otel: the deadline left on a task's span", () => {
  it("a named task started under a deadline carries keel.deadline.left_ms", async () => {
    await run(
      function* handler() {
        yield* timeout(300, function* () {
          yield* sleep(100);
          const t = yield* spawn(function* lookup() {
            yield* sleep(1);
          });
          yield* t;
        });
      },
      { clock: createVirtualClock() },
    );
    const spans = otel.spans();
    expect(only(spans, "lookup").attributes["keel.deadline.left_ms"]).toBe(200);
    expect(only(spans, "handler").attributes["keel.deadline.left_ms"]).toBeUndefined();
  });
});

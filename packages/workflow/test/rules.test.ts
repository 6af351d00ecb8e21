import { isTimeoutError, remaining, run, scoped, sleep, until } from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import { crashingStore as crashAt } from "@keel/testing/workflow";
import { describe, expect, it } from "vitest";
import {
  createMemoryStore,
  type ExecutionView,
  now,
  patched,
  random,
  sleepFor,
  startWorkflowEngine,
  step,
  type Workflow,
  type WorkflowStore,
  waitForEvent,
  workflow,
} from "../src/index.js";

const DAY = 24 * 3600_000;

/** Starts `w` with `input` on a fresh engine over `store`, and returns its view once it has ended. */
function* runToEnd(
  store: WorkflowStore,
  defs: Workflow<never, unknown>[],
  w: Workflow<never, unknown>,
  input: unknown,
  id = "e1",
) {
  const engine = yield* startWorkflowEngine({ store, workflows: defs, pollMs: 60_000 });
  yield* engine.start(w, input as never, { id });
  try {
    yield* engine.result(id);
  } catch {}
  return (yield* engine.get(id)) as ExecutionView;
}

describe("W4: the determinism guard", () => {
  it("code changed under a running execution fails it, naming the asked step and the journal's entry", async () => {
    const store = createMemoryStore();
    const clock = createVirtualClock();
    const v1 = workflow("pay", function* () {
      yield* step("charge", function* () {
        return 1;
      });
      yield* sleepFor(DAY);
      yield* step("receipt", function* () {
        return 2;
      });
    });
    const ran: string[] = [];
    const v1changed = workflow("pay", function* () {
      yield* step("reserve", function* () {
        ran.push("reserve");
        return 0;
      }); // a new first step
      yield* sleepFor(DAY);
      yield* step("receipt", function* () {
        ran.push("receipt");
        return 2;
      });
    });
    const view = await run(
      function* () {
        yield* scoped(function* () {
          const e = yield* startWorkflowEngine({ store, workflows: [v1], pollMs: 60_000 });
          yield* e.start(v1, null, { id: "p" });
          yield* sleep(10_000); // parked on its sleep
        });
        return yield* runToEnd(store, [v1changed], v1changed, null, "p");
      },
      { clock },
    );
    expect(view.status).toBe("failed");
    expect(view.error?.name).toBe("NonDeterminismError");
    expect(view.error?.message).toContain("step:reserve#1");
    expect(view.error?.message).toContain("step:charge#1");
    expect(ran).toEqual([]); // nothing of the new code ran: nothing skipped, nothing done twice
  });

  it("patched(id) lets a running execution keep the old path and new ones take the new", async () => {
    const store = createMemoryStore();
    const clock = createVirtualClock();
    const ran: string[] = [];
    const v1 = workflow("ship", function* () {
      yield* step("pack", function* () {
        ran.push("pack");
      });
      yield* sleepFor(DAY);
      return yield* step("send", function* () {
        ran.push("send");
        return "sent";
      });
    });
    const v1patched = workflow("ship", function* () {
      yield* step("pack", function* () {
        ran.push("pack");
      });
      if (yield* patched("insure"))
        yield* step("insure", function* () {
          ran.push("insure");
        });
      yield* sleepFor(DAY);
      return yield* step("send", function* () {
        ran.push("send");
        return "sent";
      });
    });
    const out = await run(
      function* () {
        yield* scoped(function* () {
          const e = yield* startWorkflowEngine({ store, workflows: [v1], pollMs: 60_000 });
          yield* e.start(v1, null, { id: "old" });
          yield* sleep(10_000);
        });
        const e = yield* startWorkflowEngine({ store, workflows: [v1patched], pollMs: 60_000 });
        yield* e.start(v1patched, null, { id: "new" });
        return [yield* e.result("old"), yield* e.result("new")];
      },
      { clock },
    );
    expect(out).toEqual(["sent", "sent"]);
    expect(ran).toEqual(["pack", "pack", "insure", "send", "send"]);
  });
});

describe("W5: only durable waits in the body", () => {
  for (const [what, wait] of [
    ["a raw sleep", () => sleep(200)],
    ["a promise", () => until(Promise.resolve(1))],
  ] as const) {
    it(`${what} outside a step is refused with an error that says to wrap it in a step`, async () => {
      const w = workflow("bad", function* () {
        yield* wait();
      });
      const view = await run(() => runToEnd(createMemoryStore(), [w], w, null), {
        clock: createVirtualClock(),
      });
      expect(view.status).toBe("failed");
      expect(view.error?.name).toBe("NonDurableWaitError");
      expect(view.error?.message).toMatch(/outside a step.*wrap it in step/);
    });
  }

  it("the refusal is thrown at the wait, where the body can catch it; the same wait inside a step runs", async () => {
    const w = workflow("ok", function* () {
      let refused = "";
      try {
        yield* sleep(5);
      } catch (e) {
        refused = (e as Error).name;
      }
      yield* step("pause", function* () {
        yield* sleep(5);
      });
      return refused;
    });
    const view = await run(() => runToEnd(createMemoryStore(), [w], w, null), {
      clock: createVirtualClock(),
    });
    expect(view.output).toBe("NonDurableWaitError");
  });
});

describe("W6/W7: durable time", () => {
  it("a 30-day sleep runs in virtual milliseconds and parks the execution", async () => {
    const clock = createVirtualClock();
    const w = workflow("month", function* () {
      const t0 = yield* now();
      yield* sleepFor(30 * DAY);
      return (yield* now()) - t0;
    });
    const store = createMemoryStore();
    const out = await run(
      function* () {
        const e = yield* startWorkflowEngine({ store, workflows: [w], pollMs: DAY });
        yield* e.start(w, null, { id: "m" });
        yield* sleep(DAY);
        const parked = yield* e.get("m");
        return { parked: parked?.status, running: e.running, slept: yield* e.result("m") };
      },
      { clock },
    );
    expect(out).toEqual({ parked: "sleeping", running: 0, slept: 30 * DAY });
  });

  it("now() and random() are journaled: a replay reads the same values", async () => {
    const store = createMemoryStore();
    const seen: number[][] = [];
    const w = workflow("dice", function* () {
      const t = yield* now();
      const r = yield* random();
      yield* step("use", function* () {
        seen.push([t, r]);
        yield* sleep(1);
      });
      return [t, r];
    });
    const crashing = crashAt(store, "step:use#1");
    const out = await run(
      function* () {
        yield* scoped(function* () {
          const e = yield* startWorkflowEngine({ store: crashing.store, workflows: [w], pollMs: 100 });
          yield* e.start(w, null, { id: "d" });
          while (crashing.crashedAt() === null) yield* sleep(1);
        });
        yield* sleep(1_000);
        const e = yield* startWorkflowEngine({ store, workflows: [w], pollMs: 100 });
        return yield* e.result("d");
      },
      {
        clock: createVirtualClock(),
        random: (() => {
          let i = 0;
          return () => [0.25, 0.75][i++ % 2]!;
        })(),
      },
    );
    expect(seen).toHaveLength(2);
    expect(seen[0]).toEqual(seen[1]);
    expect(out).toEqual(seen[0]);
  });
});

describe("W8: events", () => {
  it("a signal sent before the wait is kept; one sent after wakes the parked execution", async () => {
    const w = workflow("approve", function* () {
      const first = yield* waitForEvent<string>("ok");
      const second = yield* waitForEvent<string>("ok");
      return [first, second];
    });
    const out = await run(
      function* () {
        const e = yield* startWorkflowEngine({ store: createMemoryStore(), workflows: [w], pollMs: 60_000 });
        yield* e.start(w, null, { id: "a" });
        yield* e.signal("a", "ok", "early"); // may come before the body reaches its wait
        yield* sleep(5_000);
        const parked = (yield* e.get("a"))?.status;
        yield* e.signal("a", "ok", "late");
        return { parked, result: yield* e.result("a") };
      },
      { clock: createVirtualClock() },
    );
    expect(out).toEqual({ parked: "waiting", result: ["early", "late"] });
  });

  it("a timeout throws TimeoutError at the wait, where the body catches it", async () => {
    const w = workflow("expire", function* () {
      try {
        return yield* waitForEvent("never", { timeoutMs: 7 * DAY });
      } catch (e) {
        return isTimeoutError(e) ? `timed out at ${yield* now()}` : "other";
      }
    });
    const view = await run(() => runToEnd(createMemoryStore(), [w], w, null), {
      clock: createVirtualClock(),
    });
    expect(view.output).toBe(`timed out at ${7 * DAY}`);
  });
});

describe("W9: values must be journalable", () => {
  it("a step returning a Date fails that step with NotJournalableError naming the path", async () => {
    const w = workflow("dates", function* () {
      return yield* step("when", function* () {
        return { at: new Date(0) };
      });
    });
    const view = await run(() => runToEnd(createMemoryStore(), [w], w, null), {
      clock: createVirtualClock(),
    });
    expect(view.status).toBe("failed");
    expect(view.error?.message).toMatch(/step when's value: at: a Date is not plain JSON.*rule W9/);
  });
});

describe("W10/W11: deadlines and cancellation across restarts", () => {
  it("remaining() inside a step after a 3-day sleep is the deadline less those 3 days", async () => {
    const w = workflow("late", function* () {
      yield* sleepFor(3 * DAY);
      return yield* step("check", function* () {
        return yield* remaining();
      });
    });
    const out = await run(
      function* () {
        const e = yield* startWorkflowEngine({ store: createMemoryStore(), workflows: [w], pollMs: DAY });
        yield* e.start(w, null, { id: "l", ttlMs: 5 * DAY });
        return yield* e.result("l");
      },
      { clock: createVirtualClock() },
    );
    expect(out).toBe(2 * DAY);
  });

  it("the deadline passing while parked cancels the body where it waits; its finally runs a compensation step", async () => {
    const w = workflow("deadline", function* () {
      yield* step("book", function* () {
        return "booked";
      });
      try {
        yield* sleepFor(10 * DAY);
      } finally {
        yield* step("unbook", function* () {
          return "unbooked";
        });
      }
    });
    const view = await run(
      function* () {
        const e = yield* startWorkflowEngine({ store: createMemoryStore(), workflows: [w], pollMs: DAY });
        yield* e.start(w, null, { id: "d", ttlMs: 2 * DAY });
        try {
          yield* e.result("d");
        } catch {}
        return yield* e.get("d");
      },
      { clock: createVirtualClock() },
    );
    expect(view?.status).toBe("failed");
    expect(view?.error?.name).toBe("ExecutionDeadlineError");
    expect(view?.steps.map((s) => s.key)).toEqual(["book#1", "sleep:#1", "unbook#1"]);
  });

  it("engine.cancel while parked runs the finally's compensation; a crash mid-compensation replays to the same point", async () => {
    const store = createMemoryStore();
    const ran: string[] = [];
    const w = workflow("trip", function* () {
      yield* step("charge", function* () {
        ran.push("charge");
      });
      try {
        yield* waitForEvent("confirmed");
        yield* step("ship", function* () {
          ran.push("ship");
        });
      } finally {
        yield* step("refund", function* () {
          ran.push("refund");
        });
        yield* step("notify", function* () {
          ran.push("notify");
        });
      }
    });
    const crashing = crashAt(store, "step:notify#1");
    const view = await run(
      function* () {
        yield* scoped(function* () {
          const e = yield* startWorkflowEngine({ store: crashing.store, workflows: [w], pollMs: 1_000 });
          yield* e.start(w, null, { id: "t" });
          yield* sleep(5_000);
          yield* e.cancel("t", "the customer changed their mind");
          while (crashing.crashedAt() === null) yield* sleep(10);
        });
        const e = yield* startWorkflowEngine({ store, workflows: [w], pollMs: 1_000 });
        try {
          yield* e.result("t");
        } catch {}
        return yield* e.get("t");
      },
      { clock: createVirtualClock() },
    );
    expect(view?.status).toBe("cancelled");
    expect(view?.error?.message).toBe("the customer changed their mind");
    expect(ran).toEqual(["charge", "refund", "notify", "notify"]);
  });
});

describe("W12: executions", () => {
  it("start is idempotent by id: a second start returns the existing execution and runs nothing", async () => {
    let runs = 0;
    const w = workflow("once", function* (n: number) {
      return yield* step("count", function* () {
        runs++;
        return n;
      });
    });
    const out = await run(
      function* () {
        const e = yield* startWorkflowEngine({ store: createMemoryStore(), workflows: [w] });
        const a = yield* e.start(w, 1, { id: "same" });
        const b = yield* e.start(w, 2, { id: "same" });
        return { a: a.created, b: b.created, result: yield* e.result("same") };
      },
      { clock: createVirtualClock() },
    );
    expect(out).toEqual({ a: true, b: false, result: 1 });
    expect(runs).toBe(1);
  });
});

import { run, scoped, sleep, spawn } from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { createMemoryStore, startWorkflowEngine, step, type WorkflowStore, workflow } from "../src/index.js";

describe("W12: executions in a fleet", () => {
  it("two engines on one store: 40 executions, each step of each run by one process at a time, all complete", async () => {
    const clock = createVirtualClock();
    const store = createMemoryStore();
    const active = new Map<string, number>();
    let overlaps = 0;
    const byOwner = new Map<string, number>();
    const w = workflow("three", function* (n: number) {
      let sum = 0;
      for (const s of ["a", "b", "c"]) {
        sum += yield* step(s, function* () {
          const key = `e${n}`;
          active.set(key, (active.get(key) ?? 0) + 1);
          if (active.get(key)! > 1) overlaps++;
          try {
            yield* sleep(50 + (n % 7) * 10);
            return n;
          } finally {
            active.set(key, active.get(key)! - 1);
          }
        });
      }
      return sum;
    });
    const results = await run(
      function* () {
        const a = yield* startWorkflowEngine({
          store,
          workflows: [w],
          owner: "a",
          concurrency: 4,
          pollMs: 20,
        });
        const b = yield* startWorkflowEngine({
          store,
          workflows: [w],
          owner: "b",
          concurrency: 4,
          pollMs: 20,
        });
        for (let n = 0; n < 40; n++) yield* (n % 2 ? a : b).start(w, n, { id: `e${n}` });
        const out: number[] = [];
        for (let n = 0; n < 40; n++) out.push(yield* a.result<number>(`e${n}`));
        for (const r of yield* a.list({ limit: 100 }))
          byOwner.set(r.status, (byOwner.get(r.status) ?? 0) + 1);
        return out;
      },
      { clock },
    );
    expect(results).toEqual(Array.from({ length: 40 }, (_, n) => 3 * n));
    expect(overlaps).toBe(0);
    expect(byOwner.get("completed")).toBe(40);
  });

  it("a process cut off from the store retries its renewal, then stops its steps before its lease ends; another resumes after it", async () => {
    const clock = createVirtualClock();
    const store = createMemoryStore();
    let cutOff = false;
    const partitioned: WorkflowStore = {
      ...store,
      renew: async (...args) => {
        if (cutOff) throw new Error("the store is unreachable");
        return store.renew(...args);
      },
    };
    const log: string[] = [];
    const w = workflow("long", function* () {
      return yield* step("work", function* () {
        const who = log.length === 0 ? "first" : "second";
        log.push(`${who} start ${clock.now()}`);
        try {
          yield* sleep(2_000);
        } finally {
          log.push(`${who} end ${clock.now()}`);
        }
        return who;
      });
    });
    const result = await run(
      function* () {
        yield* spawn(function* () {
          yield* scoped(function* () {
            const a = yield* startWorkflowEngine({
              store: partitioned,
              workflows: [w],
              owner: "a",
              leaseMs: 900,
              pollMs: 50,
            });
            yield* a.start(w, null, { id: "x" });
            yield* sleep(100);
            cutOff = true;
            yield* sleep(10_000);
          });
        });
        yield* sleep(50);
        const b = yield* startWorkflowEngine({ store, workflows: [w], owner: "b", leaseMs: 900, pollMs: 50 });
        return yield* b.result("x");
      },
      { clock },
    );
    expect(result).toBe("second");
    // Renewals every third of the lease (900): the one at 300 fails and is tried again at 600,
    // which fails too, with the next try (900) past the lease's end: the first run is cut at 600,
    // before the lease ends; the second starts only once it has.
    expect(log).toEqual([
      "first start 0",
      "first end 600",
      expect.stringMatching(/^second start (9\d\d|1\d\d\d)$/),
      expect.stringMatching(/^second end/),
    ]);
  });

  it("a shutdown hands its executions back: the step in flight is cancelled, another process resumes at once", async () => {
    const clock = createVirtualClock();
    const store = createMemoryStore();
    const log: string[] = [];
    const w = workflow("handback", function* () {
      yield* step("one", function* () {
        log.push("one");
      });
      return yield* step("two", function* () {
        log.push(`two start ${clock.now()}`);
        try {
          yield* sleep(1_000);
        } finally {
          log.push(`two end ${clock.now()}`);
        }
        return "done";
      });
    });
    const out = await run(
      function* () {
        yield* scoped(function* () {
          const a = yield* startWorkflowEngine({ store, workflows: [w], owner: "a" });
          yield* a.start(w, null, { id: "h" });
          yield* sleep(500);
        });
        const released = (yield* (yield* startWorkflowEngine({ store, workflows: [], run: false })).get("h"))
          ?.status;
        const b = yield* startWorkflowEngine({ store, workflows: [w], owner: "b" });
        return { released, result: yield* b.result("h"), at: clock.now() };
      },
      { clock },
    );
    expect(out).toEqual({ released: "pending", result: "done", at: 1_500 });
    expect(log).toEqual(["one", "two start 0", "two end 500", "two start 500", "two end 1500"]);
  });

  it("a store that fails is one workflow:store warning, asked again every pollMs, then one up; the work completes", async () => {
    const clock = createVirtualClock();
    const store = createMemoryStore();
    let failing = true;
    const flaky: WorkflowStore = {
      ...store,
      claim: async (...args) => {
        if (failing) throw new Error("connection refused");
        return store.claim(...args);
      },
    };
    const events: string[] = [];
    const w = workflow("small", function* () {
      return yield* step("x", function* () {
        return 1;
      });
    });
    const out = await run(
      function* () {
        // Started by an engine that runs nothing: the execution waits for a claim.
        const starter = yield* startWorkflowEngine({ store: flaky, workflows: [w], run: false });
        yield* starter.start(w, null, { id: "s" });
        const e = yield* startWorkflowEngine({ store: flaky, workflows: [w], pollMs: 1_000 });
        yield* sleep(10_500);
        failing = false;
        return { result: yield* e.result("s"), at: clock.now() };
      },
      {
        clock,
        onEvent: (ev) => {
          if (ev.type === "workflow:store")
            events.push(
              `${ev.state} ${ev.at}${ev.state === "up" ? ` after ${ev.downForMs}` : ""}: ${ev.message}`,
            );
        },
      },
    );
    expect(out).toEqual({ result: 1, at: 11_000 });
    expect(events).toEqual([
      "down 0: workflow store memory failed (Error: connection refused): claiming again every 1000 ms",
      "up 11000 after 11000: workflow store memory answers again",
    ]);
  });

  it("a rolling deploy: an engine without an execution's version leaves it pending for one that has it", async () => {
    const store = createMemoryStore();
    const v1 = workflow("greet", function* () {
      return yield* step("hi", function* () {
        return "v1";
      });
    });
    const v2 = workflow(
      "greet",
      function* () {
        return yield* step("hello", function* () {
          return "v2";
        });
      },
      { version: 2 },
    );
    const out = await run(
      function* () {
        const old = yield* startWorkflowEngine({ store, workflows: [v1], owner: "old", pollMs: 100 });
        const fresh = yield* scoped(function* () {
          const starter = yield* startWorkflowEngine({ store, workflows: [v2], run: false });
          return (yield* starter.start(v2, null, { id: "new-one" })).id;
        });
        yield* sleep(5_000);
        const untouched = (yield* old.get(fresh))?.status;
        const next = yield* startWorkflowEngine({ store, workflows: [v1, v2], owner: "new", pollMs: 100 });
        return { untouched, result: yield* next.result(fresh) };
      },
      { clock: createVirtualClock() },
    );
    expect(out).toEqual({ untouched: "pending", result: "v2" });
  });
});

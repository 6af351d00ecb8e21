import { all, race, run, scoped, sleep, spawn } from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import { crashingStore as crashAt } from "@keel/testing/workflow";
import { describe, expect, it } from "vitest";
import { createMemoryStore, startWorkflowEngine, step, type WorkflowStore, workflow } from "../src/index.js";

/** Runs `start` on an engine over a store that dies at `at`, then a second engine to the end. */
function* crashThenResume(
  store: WorkflowStore,
  at: string,
  defs: Parameters<typeof startWorkflowEngine>[0]["workflows"],
  start: (e: Awaited<ReturnType<typeof startEngine>>) => Generator<unknown, string, unknown>,
) {
  const crashing = crashAt(store, at);
  const id = yield* scoped(function* () {
    const a = yield* startWorkflowEngine({ store: crashing.store, workflows: defs, owner: "a", pollMs: 100 });
    const id = yield* start(a);
    while (crashing.crashedAt() === null) yield* sleep(10);
    return id;
  });
  const b = yield* startWorkflowEngine({ store, workflows: defs, owner: "b", pollMs: 100 });
  return { id, result: yield* b.result(id), view: yield* b.get(id) };
}
const startEngine = (o: Parameters<typeof startWorkflowEngine>[0]) => run(() => startWorkflowEngine(o));

describe("W1/W3: a crash resumes where it stopped", () => {
  it("a process killed inside step 2: step 1 ran once, step 2 again, step 3 once, same result", async () => {
    const ran: string[] = [];
    const w = workflow("three", function* (x: number) {
      const a = yield* step("one", function* () {
        ran.push("one");
        return x + 1;
      });
      const b = yield* step("two", function* () {
        ran.push("two");
        yield* sleep(50);
        return a * 2;
      });
      return yield* step("three", function* () {
        ran.push("three");
        return `${b}!`;
      });
    });
    const store = createMemoryStore();
    const out = await run(
      () =>
        crashThenResume(store, "step:two#1", [w], function* (e) {
          return (yield* e.start(w, 4, { id: "x" })).id;
        }),
      { clock: createVirtualClock() },
    );
    expect(out.result).toBe("10!");
    expect(ran).toEqual(["one", "two", "two", "three"]);
    expect(out.view?.steps.map((s) => s.key)).toEqual(["one#1", "two#1", "three#1"]);
  });

  it("all/race/spawn branches replay by identity, whatever order they completed in", async () => {
    const ran: string[] = [];
    const w = workflow("fan", function* () {
      const [slow, fast] = yield* all([
        function* () {
          return yield* step("fetch", function* () {
            ran.push("slow");
            yield* sleep(100);
            return "slow";
          });
        },
        function* () {
          return yield* step("fetch", function* () {
            ran.push("fast");
            yield* sleep(1);
            return "fast";
          });
        },
      ]);
      const winner = yield* race([
        step("a", function* () {
          ran.push("a");
          yield* sleep(30);
          return "a";
        }),
        step("b", function* () {
          ran.push("b");
          yield* sleep(5);
          return "b";
        }),
      ]);
      const bg = yield* spawn(function* () {
        return yield* step("bg", function* () {
          ran.push("bg");
          return 7;
        });
      });
      const last = yield* step("last", function* () {
        ran.push("last");
        yield* sleep(5);
        return "L";
      });
      return [slow, fast, winner, yield* bg, last];
    });
    const store = createMemoryStore();
    const out = await run(
      () =>
        crashThenResume(store, "step:last#1", [w], function* (e) {
          return (yield* e.start(w, null, { id: "f" })).id;
        }),
      { clock: createVirtualClock() },
    );
    expect(out.result).toEqual(["slow", "fast", "b", 7, "L"]);
    // Only the step in flight at the crash ran again. The racer that lost ("a") was cancelled, never
    // journaled: the replay takes the journaled winner and cancels it again before it can matter.
    expect(ran.filter((r) => r !== "a").sort()).toEqual(["b", "bg", "fast", "last", "last", "slow"]);
    expect(out.view?.steps.map((s) => s.key).sort()).toEqual([
      "0/fetch#1",
      "1/fetch#1",
      "3/b#1",
      "4/bg#1",
      "last#1",
    ]);
  });

  it("W3: a step before a spawn does not shift the branch's identity between the first run and a replay", async () => {
    const ran: string[] = [];
    const w = workflow("shift", function* () {
      const first = yield* step("first", function* () {
        ran.push("first");
        return 1;
      });
      const [a, b] = yield* all([
        function* () {
          return yield* step("left", function* () {
            ran.push("left");
            return first + 1;
          });
        },
        function* () {
          return yield* step("right", function* () {
            ran.push("right");
            return first + 2;
          });
        },
      ]);
      const late = yield* spawn(function* () {
        return yield* step("late", function* () {
          ran.push("late");
          return a + b;
        });
      });
      return yield* step("end", function* () {
        ran.push("end");
        return yield* late;
      });
    });
    const store = createMemoryStore();
    const out = await run(
      () =>
        crashThenResume(store, "step:end#1", [w], function* (e) {
          return (yield* e.start(w, null, { id: "s" })).id;
        }),
      { clock: createVirtualClock() },
    );
    expect(out.result).toBe(5);
    expect(out.view?.status).toBe("completed");
    expect(ran.sort()).toEqual(["end", "end", "first", "late", "left", "right"]);
  });
});

import { run, sleep } from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import { describe, expect, it } from "vitest";
import {
  createMemoryStore,
  sleepFor,
  startWorkflowEngine,
  step,
  waitForEvent,
  workflow,
} from "../src/index.js";

describe("a workflow runs its steps once and journals them", () => {
  it("runs, completes, and get() shows the steps", async () => {
    const clock = createVirtualClock();
    const ran: string[] = [];
    const w = workflow("order", function* (n: number) {
      const a = yield* step("charge", function* () {
        ran.push("charge");
        yield* sleep(10);
        return n * 2;
      });
      const b = yield* step("ship", function* () {
        ran.push("ship");
        return `${a}-shipped`;
      });
      return b;
    });
    const store = createMemoryStore();
    const out = await run(
      function* () {
        const engine = yield* startWorkflowEngine({ store, workflows: [w] });
        const s = yield* engine.start(w, 21, { id: "o1" });
        const result = yield* engine.result(s.id);
        const view = yield* engine.get("o1");
        return { result, view };
      },
      { clock },
    );
    expect(out.result).toBe("42-shipped");
    expect(ran).toEqual(["charge", "ship"]);
    expect(out.view?.status).toBe("completed");
    expect(out.view?.steps.map((s) => [s.key, s.value, s.durationMs])).toEqual([
      ["charge#1", 42, 10],
      ["ship#1", "42-shipped", 0],
    ]);
  });

  it("sleeps durably and parks, events are taken", async () => {
    const clock = createVirtualClock();
    const w = workflow("wait", function* () {
      yield* sleepFor(3 * 24 * 3600_000);
      const p = yield* waitForEvent<{ ok: boolean }>("approved");
      return p;
    });
    const store = createMemoryStore();
    const out = await run(
      function* () {
        const engine = yield* startWorkflowEngine({ store, workflows: [w] });
        yield* engine.start(w, null, { id: "w1" });
        yield* sleep(5_000);
        const parked = (yield* engine.get("w1"))?.status;
        yield* sleep(3 * 24 * 3600_000);
        const waiting = (yield* engine.get("w1"))?.status;
        yield* engine.signal("w1", "approved", { ok: true });
        return { parked, waiting, result: yield* engine.result("w1"), at: clock.now() };
      },
      { clock },
    );
    expect(out).toMatchObject({ parked: "sleeping", waiting: "waiting", result: { ok: true } });
  });
});

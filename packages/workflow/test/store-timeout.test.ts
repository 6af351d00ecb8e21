/**
 * No hidden hang (issue 25, the engine's store calls): a store that stops answering fails each
 * call after `storeTimeoutMs`. An execution whose write hangs stops in this process (`lost`) and is
 * resumed once the store answers and its lease has ended; a claim that hangs reports the store
 * down. Real clock, on loopback timings only (a hung promise cannot advance a virtual clock).
 */
import { type KeelEvent, run, sleep } from "@keel/core";
import { describe, expect, it } from "vitest";
import { createMemoryStore, startWorkflowEngine, step, type WorkflowStore, workflow } from "../src/index.js";

function hangable(store: WorkflowStore) {
  const hang = { append: false, claim: false };
  const never = new Promise<never>(() => {});
  const wrapped: WorkflowStore = {
    ...store,
    append: (...args) => (hang.append ? never : store.append(...args)),
    claim: (...args) => (hang.claim ? never : store.claim(...args)),
  };
  return { hang, store: wrapped };
}

describe("W12: every store call is bounded by storeTimeoutMs", () => {
  it("a journal write that hangs stops the execution here (lost); it completes once the store answers again", async () => {
    const { hang, store } = hangable(createMemoryStore());
    const events: string[] = [];
    let runs = 0;
    const w = workflow("paused-db", function* () {
      return yield* step("write", function* () {
        runs++;
        if (runs === 1) hang.append = true; // the database pauses as this step's outcome is written
        return "written";
      });
    });
    const onEvent = (e: KeelEvent) => {
      if (e.type === "workflow:execution") events.push(e.transition);
    };
    const result = await run(
      function* () {
        const engine = yield* startWorkflowEngine({
          store,
          workflows: [w],
          storeTimeoutMs: 200,
          leaseMs: 600,
          pollMs: 50,
        });
        yield* engine.start(w, null, { id: "p" });
        while (!events.includes("lost")) yield* sleep(20);
        hang.append = false;
        return yield* engine.result("p");
      },
      { onEvent },
    );
    expect(result).toBe("written");
    expect(runs).toBe(2);
    expect(events).toEqual(["run", "lost", "run", "complete"]);
  }, 20_000);

  it("a claim that hangs reports the store down, with a StoreTimeoutError, and up once it answers", async () => {
    const { hang, store } = hangable(createMemoryStore());
    const seen: { state: string; code?: string }[] = [];
    await run(
      function* () {
        hang.claim = true;
        const engine = yield* startWorkflowEngine({ store, workflows: [], storeTimeoutMs: 100, pollMs: 50 });
        yield* sleep(400);
        hang.claim = false;
        yield* sleep(400);
        return engine.running;
      },
      {
        onEvent: (e) => {
          if (e.type === "workflow:store")
            seen.push({ state: e.state, code: (e.error as { code?: string } | undefined)?.code });
        },
      },
    );
    expect(seen.slice(0, 2)).toEqual([
      { state: "down", code: "KEEL_STORE_TIMEOUT" },
      { state: "up", code: undefined },
    ]);
  }, 20_000);
});

import { isKeelError, run, sleep } from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import { describe, expect, it } from "vitest";
import {
  createMemoryStore,
  type ExecutionView,
  now,
  patched,
  random,
  sleepFor,
  sleepUntil,
  startWorkflowEngine,
  step,
  stepInfo,
  waitForEvent,
  workflow,
} from "../src/index.js";

describe("W2: workflow operations run only in a body, and steps do not nest", () => {
  it("each workflow operation outside a body throws NotInWorkflowError naming it", async () => {
    const ops = {
      step: () => step("charge", function* () {}),
      sleepFor: () => sleepFor(1),
      sleepUntil: () => sleepUntil(1),
      waitForEvent: () => waitForEvent("approved"),
      now: () => now(),
      random: () => random(),
      patched: () => patched("fix"),
      stepInfo: () => stepInfo(),
    };
    const codes = await run(function* () {
      const out: Record<string, string> = {};
      for (const [name, op] of Object.entries(ops)) {
        try {
          yield* op();
          out[name] = "ran";
        } catch (e) {
          out[name] = isKeelError(e) ? `${e.code} ${e.message.split(":")[0]}` : String(e);
        }
      }
      return out;
    });
    expect(codes).toEqual({
      step: 'KEEL_NOT_IN_WORKFLOW step("charge")',
      sleepFor: "KEEL_NOT_IN_WORKFLOW sleepFor(1)",
      sleepUntil: "KEEL_NOT_IN_WORKFLOW sleepUntil",
      waitForEvent: 'KEEL_NOT_IN_WORKFLOW waitForEvent("approved")',
      now: "KEEL_NOT_IN_WORKFLOW now()",
      random: "KEEL_NOT_IN_WORKFLOW random()",
      patched: 'KEEL_NOT_IN_WORKFLOW patched("fix")',
      stepInfo: "KEEL_NOT_IN_WORKFLOW stepInfo()",
    });
  });

  it("a step inside a step's operation fails that step with NotInWorkflowError; ordinary Keel waits run there", async () => {
    const w = workflow("nested", function* () {
      const outer = yield* step("outer", function* () {
        yield* sleep(50); // ordinary Keel code: any wait
        try {
          yield* step("inner", function* () {});
          return "nested";
        } catch (e) {
          return (e as Error).name;
        }
      });
      return outer;
    });
    const view = await run(
      function* () {
        const e = yield* startWorkflowEngine({ store: createMemoryStore(), workflows: [w], pollMs: 60_000 });
        yield* e.start(w, null, { id: "n" });
        yield* e.result("n");
        return (yield* e.get("n")) as ExecutionView;
      },
      { clock: createVirtualClock() },
    );
    expect(view.output).toBe("NotInWorkflowError");
    expect(view.steps.map((s) => s.key)).toEqual(["outer#1"]);
  });
});

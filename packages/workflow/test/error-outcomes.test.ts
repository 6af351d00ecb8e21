import { testWorkflow } from "@keel/testing/workflow";
import { describe, expect, it } from "vitest";
import { step, workflow } from "../src/index.js";

class CardDeclined extends Error {
  override name = "CardDeclined";
  readonly code = "CARD_DECLINED";
  constructor(readonly declineCode: string) {
    super(`card declined: ${declineCode}`);
  }
}

describe("W3: a step's error is its journaled outcome", () => {
  it("the first run and a replay see the same restored error: name, message, code and own JSON properties", async () => {
    const seen: string[] = [];
    let charges = 0;
    const w = workflow("declined", function* () {
      try {
        yield* step("charge", function* () {
          charges++;
          throw new CardDeclined("insufficient_funds");
        });
      } catch (e) {
        const err = e as Error & { code?: string; declineCode?: string };
        seen.push(`${err instanceof CardDeclined} ${err.name} ${err.code} ${err.declineCode} ${err.message}`);
      }
      return yield* step("notify", function* () {
        return "notified";
      });
    });
    const r = await testWorkflow(w, null, { crashAt: "step:notify#1" });
    expect(r.result).toBe("notified");
    expect(charges).toBe(1);
    // Not the class (the journal keeps data, not classes): compare by name or code, as Keel's guards do.
    expect(seen).toEqual([
      "false CardDeclined CARD_DECLINED insufficient_funds card declined: insufficient_funds",
      "false CardDeclined CARD_DECLINED insufficient_funds card declined: insufficient_funds",
    ]);
  });
});

import { testWorkflow } from "@keel/testing/workflow";
import { describe, expect, it } from "vitest";
import { sleepFor, step, waitForEvent, workflow } from "../src/index.js";

const DAY = 24 * 3600_000;

describe("@keel/testing/workflow", () => {
  const ran: string[] = [];
  const trip = workflow("trip", function* (who: string) {
    const hotel = yield* step("hotel", function* () {
      ran.push("hotel");
      return `room for ${who}`;
    });
    yield* sleepFor(30 * DAY);
    const ok = yield* waitForEvent<boolean>("confirmed", { timeoutMs: DAY });
    const flight = yield* step("flight", function* () {
      ran.push("flight");
      return ok ? "booked" : "none";
    });
    return { hotel, flight };
  });

  it("crashes at the named entries, replays on the same store, and says which steps ran again", async () => {
    ran.length = 0;
    const r = await testWorkflow(trip, "ada", {
      crashAt: ["step:hotel#1", "step:flight#1"],
      *during(engine) {
        yield* engine.signal("test", "confirmed", true);
      },
    });
    expect(r.status).toBe("completed");
    expect(r.result).toEqual({ hotel: "room for ada", flight: "booked" });
    expect(r.crashedAt).toEqual(["step:hotel#1", "step:flight#1"]);
    expect([...r.ranAgain].sort()).toEqual(["flight#1", "hotel#1"]);
    expect(r.runs.get("hotel#1")).toBe(2);
    expect(ran).toEqual(["hotel", "hotel", "flight", "flight"]);
    expect(r.journal.map((e) => e.key)).toEqual([
      "step:hotel#1",
      "sleep:#1",
      "event:confirmed#1:timeout",
      "event:confirmed#1",
      "step:flight#1",
    ]);
  });

  it("a crash key the execution never reaches is named in the error", async () => {
    await expect(
      testWorkflow(trip, "bo", {
        crashAt: "step:hotle#1",
        *during(e) {
          yield* e.signal("test", "confirmed", true);
        },
      }),
    ).rejects.toThrow(/ended before it reached step:hotle#1/);
  });
});

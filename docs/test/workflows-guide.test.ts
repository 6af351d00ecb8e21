/**
 * The workflow and its vitest test printed in docs/guide/workflows.md ("Testing a workflow"), run as
 * written.
 */
import { testWorkflow } from "@keel/testing/workflow";
import { sleepFor, step, workflow } from "@keel/workflow";
import { expect, it } from "vitest";

const DAY = 24 * 3600_000;
const sent: string[] = [];

const trial = workflow("trial", function* (email: string) {
  yield* step("welcome", function* () {
    sent.push(`welcome ${email}`);
  });
  yield* sleepFor(30 * DAY);
  const invoice = yield* step("charge", function* () {
    return `inv-${email}`;
  });
  yield* step("receipt", function* () {
    sent.push(`receipt ${invoice}`);
  });
  return invoice;
});

it("a 30-day trial, its process killed while sending the receipt, sends the welcome once", async () => {
  const r = await testWorkflow(trial, "ada@example.com", { crashAt: "step:receipt#1" });
  expect(r.result).toBe("inv-ada@example.com");
  expect(r.crashedAt).toEqual(["step:receipt#1"]);
  expect(r.ranAgain).toEqual(["receipt#1"]); // the step in flight at the crash, and only it
  expect(sent).toEqual([
    "welcome ada@example.com",
    "receipt inv-ada@example.com",
    "receipt inv-ada@example.com",
  ]);
  expect(r.view.steps.map((s) => s.key)).toEqual(["welcome#1", "sleep:#1", "charge#1", "receipt#1"]);
});

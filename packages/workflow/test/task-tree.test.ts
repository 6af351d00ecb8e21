/**
 * What `formatTaskTree` shows of the executions a process runs: each execution's task, its body
 * (`workflow <name> <id>`), the step in flight under it and what that step waits on, and what a
 * body that has not parked waits on (a durable sleep's instant, an event and its timeout). A parked
 * execution has left the process: the tree no longer has it, the store says what it waits on.
 */
import { all, formatTaskTree, sleep, snapshot, useTask } from "@keel/core";
import { createHarness } from "@keel/testing";
import { describe, expect, it } from "vitest";
import {
  createMemoryStore,
  sleepFor,
  startWorkflowEngine,
  step,
  waitForEvent,
  workflow,
} from "../src/index.js";

const HOUR = 3600_000;
const START = Date.UTC(2026, 11, 6, 9, 0);

const payment = workflow("payment", function* (cents: number) {
  return yield* step(
    "charge",
    function* chargeCard() {
      yield* sleep(5000);
      return `ch_${cents}`;
    },
    { timeoutMs: 30_000 },
  );
});
const approval = workflow("approval", function* () {
  return yield* waitForEvent<string>("approved", { timeoutMs: 24 * HOUR });
});
const patient = workflow("patient", function* () {
  return yield* waitForEvent<string>("approved");
});
const reminder = workflow("reminder", function* () {
  yield* sleepFor(HOUR / 2);
});
const fan = workflow("fan", function* () {
  return yield* all([
    step("a", function* () {
      yield* sleep(4000);
      return 1;
    }),
    step("b", function* () {
      yield* sleep(4000);
      return 2;
    }),
  ]);
});

describe("formatTaskTree of a process running workflows", () => {
  it("shows each execution's body, the step in flight with what it waits on, and the durable waits of bodies not yet parked", async () => {
    const h = createHarness({ start: START });
    const store = createMemoryStore();
    const { tree, parked } = await h.run(function* app() {
      const self = yield* useTask();
      // A body parks when its next wake is a day away or more: the approval's timeout (a day) and
      // the reminder's half hour keep them in memory; the patient one (no timeout) parks at once.
      const engine = yield* startWorkflowEngine({
        store,
        workflows: [payment, approval, patient, reminder, fan],
        parkAfterMs: 25 * HOUR,
      });
      yield* engine.start(payment, 250, { id: "pay-1" });
      yield* engine.start(approval, null, { id: "appr-1" });
      yield* engine.start(patient, null, { id: "appr-2" });
      yield* engine.start(reminder, null, { id: "rem-1" });
      yield* engine.start(fan, null, { id: "fan-1" });
      yield* sleep(1500);
      return { tree: formatTaskTree(snapshot(self)), parked: yield* engine.get("appr-2") };
    });

    const lines = tree.split("\n");
    const line = (pattern: RegExp) => {
      const found = lines.filter((l) => pattern.test(l));
      if (found.length !== 1) throw new Error(`expected one line ${pattern}, got ${found.length}:\n${tree}`);
      return found[0]!;
    };
    // An execution is a task of the engine's; its body and its lease keeper are its children.
    expect(line(/^ {4}execution pay-1#\d+ running/)).toMatch(/waiting on join workflow payment pay-1#\d+/);
    expect(line(/^ {6}workflow payment pay-1#\d+ /)).toMatch(
      /running 1\.5s, waiting on step charge#1 for 1\.5s$/,
    );
    // The step in flight: its own task, under the body, with its timeout and its wait.
    expect(line(/^ {8}step charge#1#\d+ /)).toMatch(
      /running 1\.5s, deadline in 28\.5s, waiting on sleep\(5000\) for 1\.5s, wakes in 3\.5s$/,
    );
    // Bodies on durable waits, not parked yet: the event with its timeout's instant, the sleep's end.
    expect(line(/^ {6}workflow approval appr-1#\d+ /)).toMatch(
      /waiting on event "approved" \(timeout at 2026-12-07T09:00:00\.000Z\) for 1\.5s$/,
    );
    expect(line(/^ {6}workflow reminder rem-1#\d+ /)).toMatch(
      /waiting on sleep until 2026-12-06T09:30:00\.000Z for 1\.5s$/,
    );
    // Steps in branches: each branch waits on its own step (keyed by its branch), each step on its work.
    expect(line(/^ {6}workflow fan fan-1#\d+ /)).toMatch(/waiting on all: 2 of 2 pending/);
    expect(line(/^ {8}all\[0\]#\d+ /)).toMatch(/waiting on step 0\/a#1 for 1\.5s$/);
    expect(line(/^ {10}step 0\/a#1#\d+ /)).toMatch(/waiting on sleep\(4000\)/);
    expect(line(/^ {10}step 1\/b#1#\d+ /)).toMatch(/waiting on sleep\(4000\)/);

    // The parked execution is no task of the process: its wait is in the store.
    expect(tree).not.toContain("appr-2");
    expect(parked).toMatchObject({ status: "waiting", waitingOn: 'event "approved"', owner: null });
    await h.expectClean();
  });
});

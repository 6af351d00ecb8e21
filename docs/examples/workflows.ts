/**
 * A durable workflow, checked against the guide page "Durable workflows": a checkout that charges a
 * card, waits up to two days for an approval, ships, and refunds in its `finally` when it does not
 * ship. It runs on the in-memory store and the virtual clock, so two days take milliseconds.
 *
 * Four runs of it: approved (it ships), never approved (the wait times out, the refund runs, the
 * execution fails), a crash inside the shipping step (`testWorkflow` replays it: the charge does not
 * run again, the shipment does), and a cancel while it waits (the refund runs, it ends cancelled).
 */
import assert from "node:assert/strict";
import { isTimeoutError, type Operation, run, sleep } from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import { testWorkflow } from "@keel/testing/workflow";
import {
  createMemoryStore,
  startWorkflowEngine,
  step,
  stepInfo,
  WorkflowFailedError,
  waitForEvent,
  workflow,
} from "@keel/workflow";

const DAY = 24 * 3600_000;

/** A payment API that honours idempotency keys: a key seen before returns the first charge. */
const payments = {
  charges: new Map<string, string>(),
  calls: 0,
  charge(cents: number, idempotencyKey: string): Operation<string> {
    const api = this;
    return {
      *[Symbol.iterator]() {
        api.calls++;
        yield* sleep(120); // the HTTP call
        const id = api.charges.get(idempotencyKey) ?? `ch_${api.charges.size + 1}_${cents}`;
        api.charges.set(idempotencyKey, id);
        return id;
      },
    };
  },
};
const log: string[] = [];

interface Order {
  readonly id: string;
  readonly cents: number;
}

const checkout = workflow("checkout", function* (order: Order) {
  const charge = yield* step(
    "charge",
    function* () {
      const { idempotencyKey } = yield* stepInfo(); // "order-1/charge#1", the same on every run
      log.push(`charge ${order.id}`);
      return yield* payments.charge(order.cents, idempotencyKey);
    },
    { retry: { attempts: 3 }, timeoutMs: 10_000 },
  );
  let shipped = false;
  try {
    const approval = yield* waitForEvent<{ by: string }>("approved", { timeoutMs: 2 * DAY });
    const parcel = yield* step("ship", function* () {
      log.push(`ship ${order.id}`);
      yield* sleep(300); // the carrier's API
      return `parcel-${order.id}`;
    });
    shipped = true;
    return { charge, parcel, approvedBy: approval.by };
  } finally {
    // Compensation: a step too, journaled, run under the cleanup budget on a cancel or a deadline.
    if (!shipped)
      yield* step("refund", function* () {
        log.push(`refund ${order.id}`);
        return `refunded ${charge}`;
      });
  }
});

// One engine, alone on its store: its own start, signal and cancel wake its poller, so it need not
// ask the store every second (the default `pollMs`, for work other processes start), and two
// virtual days are a few timer jumps, not 172,800 polls.
const alone = { workflows: [checkout], pollMs: DAY } as const;

// 1. Approved: the body waits (parked, its memory freed), the signal wakes it, it ships.
{
  log.length = 0;
  const out = await run(
    function* () {
      const engine = yield* startWorkflowEngine({ store: createMemoryStore(), ...alone });
      yield* engine.start(checkout, { id: "order-1", cents: 4_200 }, { id: "order-1" });
      yield* sleep(60_000);
      const waiting = yield* engine.get("order-1");
      yield* engine.signal("order-1", "approved", { by: "ops" });
      const result = yield* engine.result("order-1");
      return { waiting, result, view: yield* engine.get("order-1") };
    },
    { clock: createVirtualClock() },
  );
  assert.equal(out.waiting?.status, "waiting"); // parked: one row, no slot held
  assert.match(out.waiting?.waitingOn ?? "", /^event "approved" \(timeout at/);
  assert.deepEqual(out.result, { charge: "ch_1_4200", parcel: "parcel-order-1", approvedBy: "ops" });
  assert.deepEqual(log, ["charge order-1", "ship order-1"]);
  assert.deepEqual(
    out.view?.steps.map((s) => [s.key, s.ok]),
    [
      ["charge#1", true],
      ["event:approved#1", true],
      ["ship#1", true],
    ],
  );
}

// 2. Never approved: after two (virtual) days the wait throws TimeoutError; the finally refunds.
{
  log.length = 0;
  const clock = createVirtualClock();
  const out = await run(
    function* () {
      const engine = yield* startWorkflowEngine({ store: createMemoryStore(), ...alone });
      yield* engine.start(checkout, { id: "order-2", cents: 990 }, { id: "order-2" });
      try {
        yield* engine.result("order-2");
        return null;
      } catch (e) {
        return e;
      }
    },
    { clock },
  );
  assert.ok(out instanceof WorkflowFailedError);
  assert.ok(isTimeoutError(out.cause)); // the journaled TimeoutError, restored with its code
  assert.deepEqual(log, ["charge order-2", "refund order-2"]);
  assert.ok(clock.now() >= 2 * DAY);
}

// 3. The process dies inside "ship": the next one replays. The charge is journaled, so it does not
//    run again; the step in flight at the crash does (at least once per step).
{
  log.length = 0;
  const calls = payments.calls;
  const r = await testWorkflow(
    checkout,
    { id: "order-3", cents: 1_500 },
    {
      id: "order-3",
      crashAt: "step:ship#1",
      *during(engine) {
        yield* engine.signal("order-3", "approved", { by: "ops" });
      },
    },
  );
  assert.equal(r.status, "completed");
  assert.deepEqual(r.crashedAt, ["step:ship#1"]);
  assert.deepEqual(r.ranAgain, ["ship#1"]);
  assert.equal(r.runs.get("charge#1"), 1);
  assert.deepEqual(log, ["charge order-3", "ship order-3", "ship order-3"]);
  assert.equal(payments.calls - calls, 1);
}

// 4. Cancelled while it waits: the finally's refund runs, the execution ends cancelled.
{
  log.length = 0;
  const out = await run(
    function* () {
      const engine = yield* startWorkflowEngine({ store: createMemoryStore(), ...alone });
      yield* engine.start(checkout, { id: "order-4", cents: 700 }, { id: "order-4" });
      yield* sleep(3_600_000);
      yield* engine.cancel("order-4", "the customer cancelled");
      try {
        yield* engine.result("order-4");
      } catch {}
      return yield* engine.get("order-4");
    },
    { clock: createVirtualClock() },
  );
  assert.equal(out?.status, "cancelled");
  assert.equal(out?.error?.message, "the customer cancelled");
  assert.deepEqual(log, ["charge order-4", "refund order-4"]);
}

console.log("workflows: approved, timed out, crashed and replayed, cancelled: all as the guide says");

/**
 * The contract's ending and reading rules: finish records the outcome and the execution never runs
 * again; list filters and orders; nextDueAt is what a poller sleeps until; JSON values come back
 * exactly as given (key order included: a replayed body that walks an object's keys must see them
 * in the order the first run saw).
 * @module
 */
import type { JournaledError, JsonValue } from "@keel/workflow";
import { describe, expect, it } from "vitest";
import { claimOne, createClaimed, entry, exec, type MakeStore, runnableIds, useStore } from "./support.js";

const failure: JournaledError = {
  name: "PaymentError",
  message: "card declined",
  code: "CARD_DECLINED",
  stack: "PaymentError: card declined\n    at charge (pay.ts:3:9)",
  data: { status: 402, retryable: false, detail: { decline: "insufficient_funds" } },
  cause: { name: "HttpError", message: "POST /charges: 402", data: { status: 402 } },
};

let deep: JsonValue = "bottom";
for (let i = 0; i < 60; i++) deep = i % 2 === 0 ? { level: i, next: deep } : [i, deep];

/** Values that a careless encoding changes. */
const TRICKY: readonly JsonValue[] = [
  null,
  true,
  false,
  0,
  -1,
  1.5,
  0.1 + 0.2,
  1e300,
  -1e-300,
  5e-324,
  Number.MAX_SAFE_INTEGER,
  -Number.MAX_SAFE_INTEGER,
  123456789.12345679,
  "",
  'quote " backslash \\ newline \n tab \t',
  "üñíçødé ✓ 中文 عربى",
  "emoji 👩‍👩‍👧 🚀",
  "nul \u0000 byte",
  "lone \ud800 surrogate",
  '{"looks":"like json"}',
  "'; DROP TABLE executions; --",
  [],
  {},
  [1, "two", null, [3, [4, { five: 5 }]]],
  { z: 1, a: 2, m: { y: [], b: {} } },
  { "": "empty key", "k.e.y": 1, ключ: "ü", "👍": [null] },
  deep,
];

/** `value` as JSON text: equal texts are equal values with equal key order. */
const text = (value: unknown) => JSON.stringify(value);

export function describeFinishListJson(makeStore: MakeStore): void {
  describe("finish", () => {
    const store = useStore(makeStore);

    it("completed records the output and endedAt, and ends the claim", async () => {
      const lease = await createClaimed(store(), "a");
      await store().finish("a", lease, { status: "completed", output: { receipt: "r-1" }, nowMs: 70 });
      expect(await store().get("a")).toMatchObject({
        status: "completed",
        output: { receipt: "r-1" },
        error: null,
        endedAt: 70,
        updatedAt: 70,
        owner: null,
        leaseUntil: null,
        wakeAt: null,
        waitingFor: [],
        waitingOn: null,
      });
    });

    it("failed and cancelled record the error, its cause and data", async () => {
      for (const status of ["failed", "cancelled"] as const) {
        const lease = await createClaimed(store(), status);
        await store().finish(status, lease, { status, error: failure, nowMs: 80 });
        const record = await store().get(status);
        expect(record).toMatchObject({ status, output: null, endedAt: 80, owner: null });
        expect(record?.error).toEqual(failure);
      }
    });

    it("an ended execution is never claimed, woken or written again", async () => {
      const lease = await createClaimed(store(), "a");
      await store().finish("a", lease, { status: "completed", output: 1, nowMs: 5 });
      expect(await store().signal("a", "x", null, 6)).toBeNull();
      expect((await store().requestCancel("a", "late", 7))?.status).toBe("completed");
      expect(await runnableIds(store(), 1e15)).toEqual([]);
      expect(await store().nextDueAt()).toBeNull();
    });
  });

  describe("list and nextDueAt", () => {
    const store = useStore(makeStore);

    it("list is newest first and filters by a status, several statuses and the workflow", async () => {
      const lease = await createClaimed(store(), "r1", "worker-a", 20);
      await store().create(exec("p1", 10));
      await store().create(exec("p2", 30, { workflow: "refunds" }));
      expect((await store().list()).map((r) => r.id)).toEqual(["p2", "r1", "p1"]);
      expect((await store().list({ status: "pending" })).map((r) => r.id)).toEqual(["p2", "p1"]);
      expect((await store().list({ status: ["running", "completed"] })).map((r) => r.id)).toEqual(["r1"]);
      expect((await store().list({ workflow: "orders" })).map((r) => r.id)).toEqual(["r1", "p1"]);
      expect((await store().list({ workflow: "refunds", status: "running" })).map((r) => r.id)).toEqual([]);
      await store().finish("r1", lease, { status: "completed", output: 1, nowMs: 40 });
      expect((await store().list({ status: "completed" }))[0]).toMatchObject({ id: "r1", output: 1 });
      expect(await store().list({ status: [] })).toEqual([]);
    });

    it("list takes at most limit, 100 by default", async () => {
      for (let i = 0; i < 105; i++) await store().create(exec(`e${i}`, i));
      expect((await store().list({ limit: 3 })).map((r) => r.id)).toEqual(["e104", "e103", "e102"]);
      expect(await store().list()).toHaveLength(100);
    });

    it("nextDueAt is null with nothing due: no executions, ended ones, an event wait with no timeout", async () => {
      expect(await store().nextDueAt()).toBeNull();
      const done = await createClaimed(store(), "done");
      await store().finish("done", done, { status: "completed", output: null, nowMs: 5 });
      const waiting = await createClaimed(store(), "waiting", "worker-a", 6);
      await store().park("waiting", waiting, {
        status: "waiting",
        wakeAt: null,
        waitingFor: ["approved"],
        waitingOn: 'event "approved"',
        signalsSeen: 0,
        nowMs: 7,
      });
      expect(await store().nextDueAt()).toBeNull();
    });

    it("nextDueAt is the earliest of a parked execution's wakeAt and a lease's end", async () => {
      const sleeper = await createClaimed(store(), "sleeper", "worker-a", 0);
      await store().park("sleeper", sleeper, {
        status: "sleeping",
        wakeAt: 700,
        waitingFor: [],
        waitingOn: "sleep",
        signalsSeen: 0,
        nowMs: 5,
      });
      await store().create(exec("runner", 10));
      const runner = await claimOne(store(), "runner", "worker-a", 10, 390);
      expect(await store().nextDueAt()).toBe(400);
      await store().finish("runner", runner, { status: "completed", output: null, nowMs: 20 });
      expect(await store().nextDueAt()).toBe(700);
    });

    it("nextDueAt of a pending execution is at once: no later than its updatedAt", async () => {
      await store().create(exec("a", 50));
      expect(await store().nextDueAt()).toBeLessThanOrEqual(50);
    });
  });

  describe("JSON values", () => {
    const store = useStore(makeStore);

    it.each(TRICKY.map((v, i) => [i, text(v).slice(0, 40), v] as const))(
      "round trip exactly (%i: %s)",
      async (_, __, value) => {
        await store().create(exec("a", 0, { input: value }));
        const [claimed] = await store().claim("worker-a", 1, 1_000, 1);
        const lease = { owner: "worker-a", generation: claimed!.record.generation };
        await store().append("a", lease, [entry("step:v#1", { value })]);
        await store().signal("a", "v", value, 2);
        await store().finish("a", lease, {
          status: "failed",
          error: { ...failure, data: { value } },
          nowMs: 3,
        });
        const b = await createClaimed(store(), "b", "worker-a", 4);
        await store().finish("b", b, { status: "completed", output: value, nowMs: 5 });
        expect(text(claimed!.record.input)).toBe(text(value));
        expect(text((await store().get("a"))?.input)).toBe(text(value));
        expect(text((await store().journal("a"))[0]?.value)).toBe(text(value));
        expect(text((await store().signals("a"))[0]?.payload)).toBe(text(value));
        expect(text((await store().get("a"))?.error?.data?.value)).toBe(text(value));
        expect(text((await store().get("b"))?.output)).toBe(text(value));
      },
    );
  });
}

/**
 * The contract's fencing and journal rules: every write names its claim and fails with
 * `LeaseLostError` once the claim is not current; `append` writes all entries or none, and a key
 * written twice is a `DuplicateEntryError`.
 * @module
 */
import {
  DuplicateEntryError,
  isLeaseLostError,
  type JournalEntry,
  type Lease,
  LeaseLostError,
  type WorkflowStore,
} from "@keel/workflow";
import { describe, expect, it } from "vitest";
import { claimOne, createClaimed, entry, exec, type MakeStore, rejection, useStore } from "./support.js";

const park = {
  status: "sleeping",
  wakeAt: 9_000,
  waitingFor: [],
  waitingOn: "sleep",
  signalsSeen: 0,
} as const;

/** Every write a claim can make, under `lease`, at 1,500. */
function writes(store: WorkflowStore, id: string, lease: Lease): Record<string, () => Promise<unknown>> {
  return {
    append: () => store.append(id, lease, [entry("step:late#1")]),
    park: () => store.park(id, lease, { ...park, nowMs: 1_500 }),
    release: () => store.release(id, lease, 1_500),
    finish: () => store.finish(id, lease, { status: "completed", output: "late", nowMs: 1_500 }),
  };
}

async function expectLost(promise: Promise<unknown>, id: string, lease: Lease): Promise<void> {
  const e = await rejection(promise);
  expect(e).toBeInstanceOf(LeaseLostError);
  expect(isLeaseLostError(e)).toBe(true);
  expect(e).toMatchObject({
    code: "KEEL_LEASE_LOST",
    executionId: id,
    owner: lease.owner,
    generation: lease.generation,
  });
}

export function describeFencingAndJournal(makeStore: MakeStore): void {
  describe("fencing", () => {
    const store = useStore(makeStore);

    it("renew extends the lease of the current claim", async () => {
      const lease = await createClaimed(store(), "a", "worker-a", 0, 1_000);
      expect(await store().renew("a", lease, 5_000)).toBe(true);
      expect((await store().get("a"))?.leaseUntil).toBe(5_000);
      expect(await store().claim("worker-b", 4_999, 1_000, 10)).toEqual([]);
    });

    it("a lease past its end still writes while no one else has claimed the execution", async () => {
      const lease = await createClaimed(store(), "a", "worker-a", 0, 1_000);
      await store().append("a", lease, [entry("step:one#1")]);
      expect(await store().renew("a", lease, 3_000)).toBe(true);
      expect((await store().journal("a")).map((e) => e.key)).toEqual(["step:one#1"]);
    });

    it("after a takeover, renew is false and every write of the old claim is LeaseLostError, changing nothing", async () => {
      const old = await createClaimed(store(), "a", "worker-a", 0, 1_000);
      await store().append("a", old, [entry("step:one#1")]);
      const current = await claimOne(store(), "a", "worker-b", 1_000);
      const before = { record: await store().get("a"), journal: await store().journal("a") };
      expect(await store().renew("a", old, 9_000)).toBe(false);
      for (const write of Object.values(writes(store(), "a", old))) await expectLost(write(), "a", old);
      expect({ record: await store().get("a"), journal: await store().journal("a") }).toEqual(before);
      expect(await store().renew("a", current, 9_000)).toBe(true);
    });

    it("a write naming the current generation under another owner's name is refused", async () => {
      const lease = await createClaimed(store(), "a", "worker-a");
      const impostor = { owner: "worker-x", generation: lease.generation };
      expect(await store().renew("a", impostor, 9_000)).toBe(false);
      for (const write of Object.values(writes(store(), "a", impostor)))
        await expectLost(write(), "a", impostor);
      expect(await store().get("a")).toMatchObject({
        status: "running",
        owner: "worker-a",
        leaseUntil: 1_000,
      });
    });

    it("a claim ended by park, release or finish can no longer write", async () => {
      for (const [id, end] of [
        ["parked", (s: WorkflowStore, l: Lease) => s.park("parked", l, { ...park, nowMs: 5 })],
        ["released", (s: WorkflowStore, l: Lease) => s.release("released", l, 5)],
        [
          "finished",
          (s: WorkflowStore, l: Lease) =>
            s.finish("finished", l, { status: "completed", output: 1, nowMs: 5 }),
        ],
      ] as const) {
        await store().create(exec(id, 0));
        const lease = await claimOne(store(), id);
        await end(store(), lease);
        expect(await store().renew(id, lease, 9_000)).toBe(false);
        for (const write of Object.values(writes(store(), id, lease))) await expectLost(write(), id, lease);
      }
    });

    it("writes to an unknown execution are LeaseLostError", async () => {
      const lease = { owner: "worker-a", generation: 1 };
      expect(await store().renew("nope", lease, 9_000)).toBe(false);
      for (const write of Object.values(writes(store(), "nope", lease)))
        await expectLost(write(), "nope", lease);
    });
  });

  describe("append", () => {
    const store = useStore(makeStore);

    it("keeps every field of every entry, in the order written", async () => {
      const lease = await createClaimed(store(), "a");
      const written: JournalEntry[] = [
        entry("step:charge#1", {
          value: { id: "ch_1", amount: 1200 },
          attempts: 3,
          startedAt: 10,
          endedAt: 250,
        }),
        entry("step:ship#1", {
          ok: false,
          value: null,
          error: {
            name: "HttpError",
            message: "POST /ship: 503",
            code: "KEEL_HTTP_STATUS",
            stack: "HttpError: POST /ship: 503\n    at ship (ship.ts:1:1)",
            data: { status: 503, retryable: true },
            cause: { name: "Error", message: "socket hang up" },
          },
          attempts: 5,
        }),
        entry("sleep#1", { kind: "sleep", value: { wakeAt: 86_400_000 }, attempts: 0 }),
        entry("event:approved#1", {
          kind: "event",
          value: { payload: { ok: true }, signal: 1 },
          attempts: 0,
        }),
        entry("random#1", { kind: "random", value: 0.5488135039273248, attempts: 0 }),
        entry("patch:v2#1", { kind: "patch", value: true, attempts: 0 }),
      ];
      await store().append("a", lease, written.slice(0, 2));
      await store().append("a", lease, written.slice(2, 3));
      await store().append("a", lease, written.slice(3));
      expect(await store().journal("a")).toEqual(written);
    });

    it("is atomic: a batch with a key already written fails whole with DuplicateEntryError", async () => {
      const lease = await createClaimed(store(), "a");
      await store().append("a", lease, [entry("step:one#1")]);
      const e = await rejection(store().append("a", lease, [entry("step:two#1"), entry("step:one#1")]));
      expect(e).toBeInstanceOf(DuplicateEntryError);
      expect(e).toMatchObject({ code: "KEEL_DUPLICATE_ENTRY", executionId: "a", key: "step:one#1" });
      expect((await store().journal("a")).map((x) => x.key)).toEqual(["step:one#1"]);
      await store().append("a", lease, [entry("step:two#1")]);
      expect((await store().journal("a")).map((x) => x.key)).toEqual(["step:one#1", "step:two#1"]);
    });

    it("a batch repeating a key within itself is DuplicateEntryError and writes nothing", async () => {
      const lease = await createClaimed(store(), "a");
      const e = await rejection(
        store().append("a", lease, [entry("step:one#1"), entry("step:two#1"), entry("step:one#1")]),
      );
      expect(e).toMatchObject({ code: "KEEL_DUPLICATE_ENTRY", key: "step:one#1" });
      expect(await store().journal("a")).toEqual([]);
    });

    it("a written key under a lost claim is LeaseLostError, not DuplicateEntryError", async () => {
      const old = await createClaimed(store(), "a", "worker-a", 0, 1_000);
      await store().append("a", old, [entry("step:one#1")]);
      await claimOne(store(), "a", "worker-b", 1_000);
      await expectLost(store().append("a", old, [entry("step:one#1")]), "a", old);
    });

    it("of no entries writes nothing and still checks the claim", async () => {
      const old = await createClaimed(store(), "a", "worker-a", 0, 1_000);
      await store().append("a", old, []);
      await claimOne(store(), "a", "worker-b", 1_000);
      await expectLost(store().append("a", old, []), "a", old);
      expect(await store().journal("a")).toEqual([]);
    });

    it("concurrent appends of several executions are each all or none: a lost claim and a duplicate fail only their own", async () => {
      for (const [id, at] of [
        ["a", 0],
        ["b", 1],
        ["c", 2],
      ] as const)
        await store().create(exec(id, at));
      expect(await store().claim("worker-a", 5, 1_000, 10)).toHaveLength(3);
      const lease = { owner: "worker-a", generation: 1 };
      await store().append("b", lease, [entry("step:one#1")]);
      const results = await Promise.allSettled([
        store().append("a", lease, [entry("step:one#1"), entry("step:two#1")]),
        store().append("b", lease, [entry("step:two#1"), entry("step:one#1")]),
        store().append("c", { owner: "worker-a", generation: 2 }, [entry("step:one#1")]),
        store().append("a", lease, [entry("step:three#1")]),
      ]);
      expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "rejected", "fulfilled"]);
      expect((results[1] as PromiseRejectedResult).reason).toMatchObject({
        code: "KEEL_DUPLICATE_ENTRY",
        executionId: "b",
        key: "step:one#1",
      });
      expect((results[2] as PromiseRejectedResult).reason).toMatchObject({
        code: "KEEL_LEASE_LOST",
        executionId: "c",
      });
      expect((await store().journal("a")).map((x) => x.key)).toEqual([
        "step:one#1",
        "step:two#1",
        "step:three#1",
      ]);
      expect((await store().journal("b")).map((x) => x.key)).toEqual(["step:one#1"]);
      expect(await store().journal("c")).toEqual([]);
    });

    it("keeps each execution's journal apart: one key in two executions is fine", async () => {
      await store().create(exec("a", 0));
      await store().create(exec("b", 1));
      const [a, b] = await store().claim("worker-a", 5, 1_000, 10);
      const lease = { owner: "worker-a", generation: 1 };
      expect([a?.record.id, b?.record.id]).toEqual(["a", "b"]);
      await store().append("a", lease, [entry("step:one#1", { value: "in a" })]);
      await store().append("b", lease, [entry("step:one#1", { value: "in b" })]);
      expect((await store().journal("a")).map((x) => x.value)).toEqual(["in a"]);
      expect((await store().journal("b")).map((x) => x.value)).toEqual(["in b"]);
    });
  });
}

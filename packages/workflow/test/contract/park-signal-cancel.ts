/**
 * The contract's waking rules: a park gives up the claim and sleeps until its `wakeAt` or a signal
 * for a name it waits for, and never sleeps through a signal sent while it ran; signals are kept in
 * seq order; a cancel request keeps its first reason and wakes a parked execution.
 * @module
 */
import type { Park } from "@keel/workflow";
import { describe, expect, it } from "vitest";
import { createClaimed, exec, type MakeStore, runnableIds, useStore } from "./support.js";

const waitFor = (names: string[], more: Partial<Park> = {}): Park => ({
  status: "waiting",
  wakeAt: 60_000,
  waitingFor: names,
  waitingOn: names.map((n) => `event "${n}"`).join(" or "),
  signalsSeen: 0,
  nowMs: 100,
  ...more,
});

const sleepUntil = (wakeAt: number, more: Partial<Park> = {}): Park => ({
  status: "sleeping",
  wakeAt,
  waitingFor: [],
  waitingOn: `sleep until ${wakeAt}`,
  signalsSeen: 0,
  nowMs: 100,
  ...more,
});

export function describeParkSignalCancel(makeStore: MakeStore): void {
  describe("park", () => {
    const store = useStore(makeStore);

    it("records what the execution waits on and ends the claim", async () => {
      const lease = await createClaimed(store(), "a");
      await store().park("a", lease, waitFor(["approved", "rejected"]));
      expect(await store().get("a")).toMatchObject({
        status: "waiting",
        wakeAt: 60_000,
        waitingFor: ["approved", "rejected"],
        waitingOn: 'event "approved" or event "rejected"',
        owner: null,
        leaseUntil: null,
        updatedAt: 100,
      });
      const other = await createClaimed(store(), "b", "worker-a", 200);
      await store().park("b", other, sleepUntil(5_000, { nowMs: 300 }));
      expect(await store().get("b")).toMatchObject({
        status: "sleeping",
        wakeAt: 5_000,
        waitingFor: [],
        waitingOn: "sleep until 5000",
        owner: null,
        leaseUntil: null,
      });
      expect(await runnableIds(store(), 4_999)).toEqual([]);
    });

    it("leaves the execution pending when a waited-for signal came after signalsSeen", async () => {
      const lease = await createClaimed(store(), "a");
      expect(await store().signal("a", "approved", { by: "ann" }, 50)).toBe(1);
      await store().park("a", lease, waitFor(["approved"], { signalsSeen: 0 }));
      expect(await store().get("a")).toMatchObject({ status: "pending", owner: null, leaseUntil: null });
      const [again] = await store().claim("worker-b", 100, 1_000, 10);
      expect(again!.record.id).toBe("a");
      expect(again!.signals).toEqual([{ seq: 1, name: "approved", payload: { by: "ann" }, at: 50 }]);
    });

    it("parks through a signal the claim has seen, or one for another name", async () => {
      const lease = await createClaimed(store(), "a");
      await store().signal("a", "approved", 1, 10);
      await store().signal("a", "shipped", 2, 20);
      await store().park("a", lease, waitFor(["approved", "rejected"], { signalsSeen: 1 }));
      expect((await store().get("a"))?.status).toBe("waiting");
      expect(await runnableIds(store(), 59_999)).toEqual([]);
    });

    it("leaves the execution pending when a cancel was requested", async () => {
      const lease = await createClaimed(store(), "a");
      await store().requestCancel("a", "user asked", 50);
      await store().park("a", lease, sleepUntil(1e12));
      expect(await store().get("a")).toMatchObject({ status: "pending", cancelRequested: "user asked" });
      expect(await runnableIds(store(), 100)).toEqual(["a"]);
    });
  });

  describe("signal", () => {
    const store = useStore(makeStore);

    it("numbers each execution's signals from 1 and keeps them in order", async () => {
      await store().create(exec("a", 0));
      await store().create(exec("b", 0));
      expect(await store().signal("a", "x", { n: 1 }, 10)).toBe(1);
      expect(await store().signal("b", "x", null, 11)).toBe(1);
      expect(await store().signal("a", "y", [2], 12)).toBe(2);
      expect(await store().signal("a", "x", "three", 13)).toBe(3);
      expect(await store().signals("a")).toEqual([
        { seq: 1, name: "x", payload: { n: 1 }, at: 10 },
        { seq: 2, name: "y", payload: [2], at: 12 },
        { seq: 3, name: "x", payload: "three", at: 13 },
      ]);
      expect(await store().signals("b")).toEqual([{ seq: 1, name: "x", payload: null, at: 11 }]);
    });

    it("sent at once by many, gets distinct seqs 1..n", async () => {
      await store().create(exec("a", 0));
      const seqs = await Promise.all(Array.from({ length: 20 }, (_, i) => store().signal("a", "tick", i, i)));
      expect([...seqs].sort((x, y) => x! - y!)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
      expect((await store().signals("a")).map((s) => s.seq)).toEqual(
        Array.from({ length: 20 }, (_, i) => i + 1),
      );
    });

    it("wakes a parked execution waiting for its name", async () => {
      const lease = await createClaimed(store(), "a");
      await store().park("a", lease, waitFor(["approved", "rejected"]));
      expect(await store().signal("a", "rejected", { why: "no" }, 150)).toBe(1);
      expect(await store().get("a")).toMatchObject({ status: "pending", owner: null, updatedAt: 150 });
      const [woken] = await store().claim("worker-b", 150, 1_000, 10);
      expect(woken!.signals).toEqual([{ seq: 1, name: "rejected", payload: { why: "no" }, at: 150 }]);
    });

    it("keeps a parked execution parked for another name, and a sleep for any name", async () => {
      const waiting = await createClaimed(store(), "waiting");
      await store().park("waiting", waiting, waitFor(["approved"]));
      const sleeping = await createClaimed(store(), "sleeping", "worker-a", 1);
      await store().park("sleeping", sleeping, sleepUntil(60_000));
      expect(await store().signal("waiting", "shipped", null, 150)).toBe(1);
      expect(await store().signal("sleeping", "approved", null, 150)).toBe(1);
      expect((await store().get("waiting"))?.status).toBe("waiting");
      expect((await store().get("sleeping"))?.status).toBe("sleeping");
      expect(await runnableIds(store(), 59_999)).toEqual([]);
    });

    it("to a running execution is kept and leaves its claim alone", async () => {
      const lease = await createClaimed(store(), "a", "worker-a", 0, 1_000);
      expect(await store().signal("a", "approved", true, 10)).toBe(1);
      expect(await store().get("a")).toMatchObject({
        status: "running",
        owner: "worker-a",
        leaseUntil: 1_000,
      });
      expect(await store().renew("a", lease, 2_000)).toBe(true);
    });

    it("to an unknown or ended execution returns null and keeps nothing", async () => {
      const lease = await createClaimed(store(), "a");
      await store().finish("a", lease, { status: "completed", output: null, nowMs: 5 });
      expect(await store().signal("a", "approved", 1, 10)).toBeNull();
      expect(await store().signal("nope", "approved", 1, 10)).toBeNull();
      expect(await store().signals("a")).toEqual([]);
      expect(await store().signals("nope")).toEqual([]);
    });
  });

  describe("requestCancel", () => {
    const store = useStore(makeStore);

    it("marks the execution and keeps the first reason", async () => {
      await store().create(exec("a", 0));
      expect(await store().requestCancel("a", "first", 10)).toMatchObject({
        id: "a",
        status: "pending",
        cancelRequested: "first",
      });
      expect((await store().requestCancel("a", "second", 20))?.cancelRequested).toBe("first");
      expect((await store().get("a"))?.cancelRequested).toBe("first");
    });

    it("wakes a parked execution, sleeping or waiting; the claim sees the request", async () => {
      const sleeping = await createClaimed(store(), "sleeping");
      await store().park("sleeping", sleeping, sleepUntil(1e12));
      const waiting = await createClaimed(store(), "waiting", "worker-a", 1);
      await store().park("waiting", waiting, waitFor(["approved"], { wakeAt: null }));
      for (const id of ["sleeping", "waiting"])
        expect(await store().requestCancel(id, "deploy", 200)).toMatchObject({ status: "pending" });
      const claimed = await store().claim("worker-b", 200, 1_000, 10);
      expect(claimed.map((c) => [c.record.id, c.record.cancelRequested]).sort()).toEqual([
        ["sleeping", "deploy"],
        ["waiting", "deploy"],
      ]);
    });

    it("of a running execution leaves its claim: no one else takes it before the lease ends", async () => {
      const lease = await createClaimed(store(), "a", "worker-a", 0, 1_000);
      expect(await store().requestCancel("a", "stop", 10)).toMatchObject({
        status: "running",
        owner: "worker-a",
        cancelRequested: "stop",
      });
      expect(await runnableIds(store(), 999)).toEqual([]);
      expect(await store().renew("a", lease, 2_000)).toBe(true);
    });

    it("of an unknown id is null; of an ended execution, the record as it is", async () => {
      expect(await store().requestCancel("nope", "x", 10)).toBeNull();
      const lease = await createClaimed(store(), "a");
      await store().finish("a", lease, { status: "completed", output: 7, nowMs: 5 });
      const ended = await store().get("a");
      expect(await store().requestCancel("a", "too late", 10)).toEqual(ended);
      expect(ended?.cancelRequested).toBeNull();
    });
  });
}

/**
 * The contract's creation and claiming rules: create is idempotent by id; claim takes only runnable
 * executions, oldest due first, never one another owner holds, and bumps the fencing token.
 * @module
 */
import { describe, expect, it } from "vitest";
import { claimOne, createClaimed, entry, exec, type MakeStore, runnableIds, useStore } from "./support.js";

export function describeCreateAndClaim(makeStore: MakeStore): void {
  describe("create", () => {
    const store = useStore(makeStore);

    it("with claim, makes it already claimed: running, the owner's, its lease, generation 1", async () => {
      const made = await store().create(exec("a", 10, { claim: { owner: "worker-a", leaseMs: 1_000 } }));
      expect(made.created).toBe(true);
      expect(made.record).toMatchObject({
        status: "running",
        owner: "worker-a",
        leaseUntil: 1_010,
        generation: 1,
        createdAt: 10,
        updatedAt: 10,
      });
      expect(await store().get("a")).toEqual(made.record);
      expect(await runnableIds(store(), 1_009), "no one else claims it while its lease holds").toEqual([]);
      const lease = { owner: "worker-a", generation: 1 };
      await store().append("a", lease, [entry("step:one#1")]);
      expect(await store().renew("a", lease, 2_000)).toBe(true);
      await store().finish("a", lease, { status: "completed", output: 1, nowMs: 20 });
      expect(await store().get("a")).toMatchObject({ status: "completed", owner: null });
    });

    it("with claim, of an id that exists, claims nothing and leaves it as it is", async () => {
      const first = await store().create(exec("a", 10));
      const again = await store().create(exec("a", 20, { claim: { owner: "worker-b", leaseMs: 1_000 } }));
      expect(again).toEqual({ created: false, record: first.record });
      expect(await runnableIds(store(), 20)).toEqual(["a"]);
    });

    it("a claimed create whose lease ended is claimed again by another owner, at generation 2", async () => {
      await store().create(exec("a", 0, { claim: { owner: "worker-a", leaseMs: 1_000 } }));
      await store().create(exec("b", 0));
      const [first, second] = await store().claim("worker-b", 1_000, 1_000, 10);
      expect([first?.record.id, second?.record.id].sort()).toEqual(["a", "b"]);
      const a = [first, second].find((c) => c?.record.id === "a")!;
      expect(a.record).toMatchObject({ owner: "worker-b", generation: 2, status: "running" });
      expect(a.journal).toEqual([]);
    });

    it("makes a pending execution, unowned, at generation 0", async () => {
      const made = await store().create(exec("a", 10, { version: 3, input: { n: 1 }, deadlineAt: 5_000 }));
      expect(made).toEqual({
        created: true,
        record: {
          id: "a",
          workflow: "orders",
          version: 3,
          input: { n: 1 },
          status: "pending",
          createdAt: 10,
          updatedAt: 10,
          deadlineAt: 5_000,
          wakeAt: null,
          waitingFor: [],
          waitingOn: null,
          owner: null,
          leaseUntil: null,
          generation: 0,
          cancelRequested: null,
          output: null,
          error: null,
          endedAt: null,
        },
      });
      expect(await store().get("a")).toEqual(made.record);
    });

    it("of an id that exists leaves the execution as it is and says created: false", async () => {
      await createClaimed(store(), "a", "worker-a", 10);
      const before = await store().get("a");
      const again = await store().create(exec("a", 20, { workflow: "other", input: "changed" }));
      expect(again).toEqual({ created: false, record: before });
      expect(await store().get("a")).toEqual(before);
    });

    it("an unknown id reads as null, with an empty journal and no signals", async () => {
      expect(await store().get("nope")).toBeNull();
      expect(await store().journal("nope")).toEqual([]);
      expect(await store().signals("nope")).toEqual([]);
    });
  });

  describe("claim", () => {
    const store = useStore(makeStore);

    it("with `only`, takes only executions whose workflow@version it names, and leaves the rest due", async () => {
      await store().create(exec("v1", 1));
      await store().create(exec("v2", 2, { version: 2 }));
      await store().create(exec("other", 3, { workflow: "refunds" }));
      const first = await store().claim("old-process", 20, 1_000, 10, ["orders@1", "refunds@3"]);
      expect(first.map((c) => c.record.id)).toEqual(["v1"]);
      const rest = await store().claim("new-process", 20, 1_000, 10, ["orders@2", "refunds@1"]);
      expect(rest.map((c) => c.record.id).sort()).toEqual(["other", "v2"]);
    });

    it("takes a pending execution: running, owned, leased until nowMs + leaseMs, generation + 1", async () => {
      await store().create(exec("a", 10));
      const claimed = await store().claim("worker-a", 20, 1_000, 10);
      expect(claimed).toHaveLength(1);
      const { record, journal, signals } = claimed[0]!;
      expect(record).toMatchObject({
        id: "a",
        status: "running",
        owner: "worker-a",
        leaseUntil: 1_020,
        generation: 1,
        wakeAt: null,
        waitingFor: [],
        waitingOn: null,
      });
      expect({ journal, signals }).toEqual({ journal: [], signals: [] });
      expect(await store().get("a")).toEqual(record);
    });

    it("hands back the journal in the order written and the signals kept", async () => {
      const lease = await createClaimed(store(), "a");
      await store().append("a", lease, [entry("step:z#1"), entry("step:a#1")]);
      await store().append("a", lease, [entry("now#1", { kind: "now", value: 5, attempts: 0 })]);
      await store().signal("a", "approved", { by: "ann" }, 30);
      await store().release("a", lease, 40);
      const [again] = await store().claim("worker-b", 50, 1_000, 10);
      expect(again!.record.generation).toBe(2);
      expect(again!.journal.map((e) => e.key)).toEqual(["step:z#1", "step:a#1", "now#1"]);
      expect(again!.journal[2]).toEqual(entry("now#1", { kind: "now", value: 5, attempts: 0 }));
      expect(again!.signals).toEqual([{ seq: 1, name: "approved", payload: { by: "ann" }, at: 30 }]);
    });

    it("takes at most limit, oldest due first", async () => {
      await store().create(exec("c", 30));
      await store().create(exec("a", 10));
      await store().create(exec("b", 20));
      const first = await store().claim("worker-a", 100, 1_000, 2);
      expect(first.map((c) => c.record.id)).toEqual(["a", "b"]);
      expect(await runnableIds(store(), 100)).toEqual(["c"]);
    });

    it("never takes an execution another owner holds until its lease ends, then takes it over", async () => {
      const lease = await createClaimed(store(), "a", "worker-a", 0, 1_000);
      await store().append("a", lease, [entry("step:one#1")]);
      expect(await store().claim("worker-b", 999, 1_000, 10)).toEqual([]);
      const [taken] = await store().claim("worker-b", 1_000, 1_000, 10);
      expect(taken!.record).toMatchObject({ status: "running", owner: "worker-b", leaseUntil: 2_000 });
      expect(taken!.record.generation).toBe(lease.generation + 1);
      expect(taken!.journal.map((e) => e.key)).toEqual(["step:one#1"]);
    });

    it("takes a parked execution when its wakeAt is due, not before, and clears what it waited on", async () => {
      const lease = await createClaimed(store(), "a");
      await store().park("a", lease, {
        status: "sleeping",
        wakeAt: 500,
        waitingFor: [],
        waitingOn: "sleep 490 ms",
        signalsSeen: 0,
        nowMs: 10,
      });
      expect(await store().claim("worker-b", 499, 1_000, 10)).toEqual([]);
      const [woken] = await store().claim("worker-b", 500, 1_000, 10);
      expect(woken!.record).toMatchObject({
        status: "running",
        owner: "worker-b",
        generation: 2,
        wakeAt: null,
        waitingFor: [],
        waitingOn: null,
      });
    });

    it("never takes an event wait with no timeout by time alone", async () => {
      const lease = await createClaimed(store(), "a");
      await store().park("a", lease, {
        status: "waiting",
        wakeAt: null,
        waitingFor: ["approved"],
        waitingOn: 'event "approved"',
        signalsSeen: 0,
        nowMs: 10,
      });
      expect(await store().claim("worker-b", 1e15, 1_000, 10)).toEqual([]);
    });

    it("never takes an ended execution", async () => {
      for (const [id, finish] of [
        ["done", { status: "completed", output: 1, nowMs: 5 }],
        ["broke", { status: "failed", error: { name: "Error", message: "x" }, nowMs: 5 }],
        ["stopped", { status: "cancelled", error: { name: "CancelledError", message: "y" }, nowMs: 5 }],
      ] as const) {
        const lease = await createClaimed(store(), id);
        await store().finish(id, lease, finish);
      }
      expect(await store().claim("worker-b", 1e15, 1_000, 10)).toEqual([]);
    });

    it("two claimers at once never both take one execution", async () => {
      await store().create(exec("only", 0));
      const claims = await Promise.all(
        Array.from({ length: 10 }, (_, i) => store().claim(`worker-${i}`, 10, 1_000, 1)),
      );
      const winners = claims.flatMap((c, i) => c.map((x) => ({ owner: `worker-${i}`, x })));
      expect(winners).toHaveLength(1);
      expect((await store().get("only"))?.owner).toBe(winners[0]!.owner);
    });

    it("many claimers at once share many executions without a double", async () => {
      const ids = Array.from({ length: 30 }, (_, i) => `e${String(i).padStart(2, "0")}`);
      for (const [i, id] of ids.entries()) await store().create(exec(id, i));
      const claims = await Promise.all(
        Array.from({ length: 12 }, (_, i) => store().claim(`worker-${i}`, 100, 1_000, 4)),
      );
      const taken = claims.flatMap((c, i) => c.map((x) => ({ id: x.record.id, owner: `worker-${i}` })));
      expect(new Set(taken.map((t) => t.id)).size).toBe(taken.length);
      for (const t of taken) expect((await store().get(t.id))?.owner).toBe(t.owner);
      const rest = await runnableIds(store(), 100);
      expect([...taken.map((t) => t.id), ...rest].sort()).toEqual(ids);
    });

    it("a release hands the execution to the next claimer at once, with a new generation", async () => {
      const lease = await createClaimed(store(), "a", "worker-a", 0, 60_000);
      await store().release("a", lease, 20);
      expect(await store().get("a")).toMatchObject({ status: "pending", owner: null, leaseUntil: null });
      const next = await claimOne(store(), "a", "worker-b", 20);
      expect(next.generation).toBe(lease.generation + 1);
    });
  });
}

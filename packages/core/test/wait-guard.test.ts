import {
  all,
  evict,
  guardWaits,
  race,
  run,
  scoped,
  sleep,
  spawn,
  suspend,
  type Task,
  until,
  type WaitGuard,
  type WaitInfo,
} from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import { describe, expect, it } from "vitest";

function recorder(refuse: (w: WaitInfo) => boolean = () => false) {
  const seen: string[] = [];
  const spawned: string[] = [];
  const guard: WaitGuard = {
    check(w) {
      seen.push(w.description);
      return refuse(w) ? new Error(`refused ${w.description}`) : undefined;
    },
    spawned(child, parent) {
      spawned.push(`${child.name}<${parent?.name ?? "-"}`);
    },
  };
  return { guard, seen, spawned };
}

describe("guardWaits", () => {
  it("sees every wait of the region and of its children, but structural ones", async () => {
    const r = recorder();
    const clock = createVirtualClock();
    await run(
      () =>
        guardWaits(r.guard, function* body() {
          yield* sleep(1);
          yield* all([
            sleep(2),
            function* b() {
              yield* sleep(3);
            },
          ]);
          yield* race([sleep(4), sleep(5)]);
          const t = yield* spawn(function* c() {
            yield* sleep(6);
          });
          yield* t;
          yield* scoped(function* () {
            yield* yield* spawn(sleep(7));
          });
        }),
      { clock },
    );
    expect(r.seen).toEqual([
      "sleep(1)",
      "sleep(2)",
      "sleep(3)",
      "sleep(4)",
      "sleep(5)",
      "sleep(6)",
      "sleep(7)",
    ]);
  });

  it("throws the refusal at the yield, where the body can catch it, and never enters the wait", async () => {
    const r = recorder((w) => w.description.startsWith("until"));
    let entered = false;
    const out = await run(() =>
      guardWaits(r.guard, function* () {
        try {
          yield* until(
            new Promise(() => {
              entered = true;
            }).then(() => 1),
          );
          return "waited";
        } catch (e) {
          return (e as Error).message;
        }
      }),
    );
    expect(out).toMatch(/^refused until/);
    expect(entered).toBe(true); // the promise's executor runs when made, not at the wait
  });

  it("a guard that throws refuses with what it threw", async () => {
    const boom = new Error("guard broke");
    const guard: WaitGuard = {
      check() {
        throw boom;
      },
    };
    await expect(run(() => guardWaits(guard, sleep(1)), { clock: createVirtualClock() })).rejects.toBe(boom);
  });

  it("guardWaits(null, op) lifts the guard inside; the region's spawns are heard in spawn order", async () => {
    const r = recorder(() => true);
    const clock = createVirtualClock();
    await run(
      () =>
        guardWaits(r.guard, function* body() {
          yield* all([
            function* first() {
              yield* guardWaits(null, sleep(30));
            },
            function* second() {
              yield* guardWaits(null, sleep(10));
            },
          ]);
        }),
      { clock },
    );
    expect(r.seen).toEqual([]);
    expect(r.spawned).toEqual(["first<run", "second<run"]);
  });

  it("refuses bad arguments with a typed error naming the parameter", () => {
    expect(() => guardWaits({} as WaitGuard, sleep(1))).toThrow(/guardWaits\(guard\)/);
    expect(() => guardWaits(null, 5 as never)).toThrow(/guardWaits\(op\)/);
  });
});

function* parkedReason(t: Task<void>) {
  try {
    yield* t;
    return null;
  } catch (e) {
    return (e as { reason?: unknown }).reason;
  }
}

describe("evict", () => {
  it("drops a subtree without running a finally, every task settled cancelled", async () => {
    const log: string[] = [];
    const clock = createVirtualClock();
    await run(
      function* () {
        const parked: Task<void> = yield* spawn(function* region() {
          try {
            yield* all([
              function* a() {
                try {
                  yield* suspend();
                } finally {
                  log.push("a finally");
                }
              },
              function* b() {
                try {
                  yield* sleep(1_000);
                } finally {
                  log.push("b finally");
                }
              },
            ]);
          } finally {
            log.push("region finally");
          }
        });
        yield* sleep(10);
        evict(parked, "parked");
        expect(parked.state).toBe("cancelled");
        {
          const reason = yield* parkedReason(parked);
          expect(reason).toMatchObject({ kind: "evicted", message: "parked" });
        }
        yield* sleep(2_000); // b's timer was cleared: nothing runs
      },
      { clock },
    );
    expect(log).toEqual([]);
  });

  it("is a no-op on a settled task and refuses what is not a task", async () => {
    await run(function* () {
      const t = yield* spawn(function* () {
        return 1;
      });
      yield* t;
      evict(t, "late");
      expect(t.state).toBe("completed");
    });
    expect(() => evict({} as Task<unknown>, "x")).toThrow(/evict\(task\)/);
  });
});

/**
 * Conformance, section H: semaphores and load control (cases 110–115 and 115b of
 * design/conformance.md). Setup unless a case says otherwise: `sem = createSemaphore(1, { name: "db" })`.
 * Every case runs on the harness's virtual clock with autojump and ends with the leak check plus the
 * semaphore's books (`available`, `waiting`).
 */
import {
  createRateLimiter,
  createSemaphore,
  forEachLimit,
  isCancelled,
  mapLimit,
  type Operation,
  race,
  type Semaphore,
  scoped,
  sleep,
  snapshot,
  spawn,
  suspend,
  type Task,
  TaskCancelledError,
} from "@keel/core";
import { createHarness, type Harness } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { rejection, suppressedOf } from "../support/errors.js";
import { byInstant } from "../support/log.js";

/** Calls `task.cancel()` at virtual time `at` (a raw timer, so it leaves nothing behind once fired). */
function cancelAt(h: Harness, task: Task<unknown>, at: number): void {
  h.clock.schedule(at, () => {
    void task.cancel();
  });
}

/**
 * Records `read()` as `text@at` at the end of instant `at`: the probe wakes at `at`, then sleeps 0,
 * so every task woken at `at` has run to its next suspension point before it reads.
 */
function probeAt(h: Harness, probes: string[], at: number, read: () => string): void {
  h.run(function* probe() {
    yield* sleep(at);
    yield* sleep(0);
    probes.push(`${read()}@${h.clock.now()}`);
  });
}

/** The semaphore's books in one string. */
function books(sem: Semaphore): string {
  return `available ${sem.available}, waiting ${sem.waiting}`;
}

/**
 * Case 110's cast: A holds the permit from 0 with `aBody`; B calls `sem.use(work)` at 10, where work
 * logs `B.acquired`, records `available` and holds the permit for 10 ms. Probes read the books at 10,
 * 50 and `lastWaitAt` (the last instant B should still be waiting), and B's task-tree entry at 50.
 */
function case110(h: Harness, aBody: () => Operation<unknown>, lastWaitAt: number) {
  const sem = createSemaphore(1, { name: "db" });
  const whileHeld: string[] = [];
  const probes: string[] = [];
  let bWaitingOn: string | null = null;
  const a = h.run(function* A() {
    return yield* sem.use(aBody);
  });
  const b = h.run(function* B() {
    yield* sleep(10);
    yield* sem.use(function* work() {
      h.mark("B.acquired");
      whileHeld.push(books(sem));
      yield* sleep(10);
    });
    h.mark("B.released");
  });
  for (const at of [10, 50, lastWaitAt]) probeAt(h, probes, at, () => books(sem));
  h.clock.schedule(50, () => {
    bWaitingOn = snapshot(b).waitingOn;
  });
  return { sem, a, b, whileHeld, probes, bWaitingOn: () => bWaitingOn };
}

describe("H. Semaphores and load control", () => {
  describe("110: a holder's permit comes back only after its cleanup, on every path", () => {
    it("a cancelled holder's permit passes to the waiter right after its finally", async () => {
      const h = createHarness();
      const { sem, a, b, whileHeld, probes, bWaitingOn } = case110(
        h,
        function* holdA() {
          try {
            yield* suspend();
          } finally {
            h.mark("A.fin");
          }
        },
        99,
      );
      cancelAt(h, a, 100);

      expect(await rejection(a)).toBeInstanceOf(TaskCancelledError);
      await b;
      expect(h.log).toEqual(["A.fin@100", "B.acquired@100", "B.released@110"]);
      expect(probes).toEqual([
        "available 0, waiting 1@10",
        "available 0, waiting 1@50",
        "available 0, waiting 1@99",
      ]);
      expect(bWaitingOn()).toContain("semaphore db");
      expect(whileHeld).toEqual(["available 0, waiting 0"]);
      expect(a.state).toBe("cancelled");
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });

    it("async cleanup in the holder's finally delays the hand-off until it ends (130)", async () => {
      const h = createHarness();
      const { sem, a, b, whileHeld, probes, bWaitingOn } = case110(
        h,
        function* holdA() {
          try {
            yield* suspend();
          } finally {
            yield* sleep(30);
            h.mark("A.fin");
          }
        },
        129,
      );
      cancelAt(h, a, 100);

      expect(await rejection(a)).toBeInstanceOf(TaskCancelledError);
      await b;
      expect(h.log).toEqual(["A.fin@130", "B.acquired@130", "B.released@140"]);
      expect(probes).toEqual([
        "available 0, waiting 1@10",
        "available 0, waiting 1@50",
        "available 0, waiting 1@129",
      ]);
      expect(bWaitingOn()).toContain("semaphore db");
      expect(whileHeld).toEqual(["available 0, waiting 0"]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });

    it("a hung cleanup is cut by the budget at 5100 and the permit passes to B then", async () => {
      const h = createHarness();
      const { sem, a, b, whileHeld, probes, bWaitingOn } = case110(
        h,
        function* holdA() {
          try {
            yield* suspend();
          } finally {
            h.mark("A.fin");
            yield* suspend();
          }
        },
        5099,
      );
      cancelAt(h, a, 100);

      expect(await rejection(a)).toBeInstanceOf(TaskCancelledError);
      await b;
      expect(h.log).toEqual(["A.fin@100", "B.acquired@5100", "B.released@5110"]);
      const overruns = h.eventsOf("cleanup:overrun");
      expect(overruns.map((e) => `${e.taskId === a.id ? "A" : e.taskId}@${e.at}`)).toEqual(["A@5100"]);
      expect(probes).toEqual([
        "available 0, waiting 1@10",
        "available 0, waiting 1@50",
        "available 0, waiting 1@5099",
      ]);
      expect(bWaitingOn()).toContain("semaphore db");
      expect(whileHeld).toEqual(["available 0, waiting 0"]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });

    it("a holder that swallows Cancelled in a loop is abandoned and B acquires at the abandonment", async () => {
      const h = createHarness();
      let catches = 0;
      let catchesAtGrant = -1;
      const sem = createSemaphore(1, { name: "db" });
      const a = h.run(function* A() {
        yield* sem.use(function* holdA() {
          for (;;) {
            try {
              yield* suspend();
            } catch (e) {
              if (!isCancelled(e)) throw e;
              catches++;
            }
          }
        });
      });
      const b = h.run(function* B() {
        yield* sleep(10);
        yield* sem.use(function* work() {
          catchesAtGrant = catches;
          h.mark("B.acquired");
          yield* sleep(10);
        });
      });
      const probes: string[] = [];
      for (const at of [10, 50, 5099]) probeAt(h, probes, at, () => books(sem));
      cancelAt(h, a, 100);

      expect(await rejection(a)).toBeInstanceOf(TaskCancelledError);
      await b;
      const abandons = h.eventsOf("cleanup:abandon").filter((e) => e.taskId === a.id);
      expect(abandons).toHaveLength(1);
      const abandonedAt = abandons[0]!.at;
      expect(abandonedAt).toBeGreaterThanOrEqual(5100);
      expect(abandonedAt).toBeLessThanOrEqual(10100);
      expect(h.log).toEqual([`B.acquired@${abandonedAt}`]);
      expect(probes).toEqual([
        "available 0, waiting 1@10",
        "available 0, waiting 1@50",
        "available 0, waiting 1@5099",
      ]);
      expect(a.state).toBe("cancelled");
      // A's generator never runs again once abandoned.
      expect(catchesAtGrant).toBeGreaterThan(0);
      await h.run(function* later() {
        yield* sleep(10_000);
      });
      expect(catches).toBe(catchesAtGrant);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });

    it("a holder that returns at 100 hands the permit to B at 100", async () => {
      const h = createHarness();
      const { sem, a, b, whileHeld, probes, bWaitingOn } = case110(
        h,
        function* holdA() {
          try {
            yield* sleep(100);
            return "a";
          } finally {
            h.mark("A.fin");
          }
        },
        99,
      );

      expect(await a).toBe("a");
      await b;
      expect(h.log).toEqual(["A.fin@100", "B.acquired@100", "B.released@110"]);
      expect(probes).toEqual([
        "available 0, waiting 1@10",
        "available 0, waiting 1@50",
        "available 0, waiting 1@99",
      ]);
      expect(bWaitingOn()).toContain("semaphore db");
      expect(whileHeld).toEqual(["available 0, waiting 0"]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });

    it("a holder that throws at 100 hands the permit to B at 100", async () => {
      const h = createHarness();
      const boom = new Error("A failed");
      const { sem, a, b, whileHeld, probes, bWaitingOn } = case110(
        h,
        function* holdA() {
          try {
            yield* sleep(100);
            throw boom;
          } finally {
            h.mark("A.fin");
          }
        },
        99,
      );

      expect(await rejection(a)).toBe(boom);
      await b;
      expect(a.state).toBe("failed");
      expect(h.log).toEqual(["A.fin@100", "B.acquired@100", "B.released@110"]);
      expect(probes).toEqual([
        "available 0, waiting 1@10",
        "available 0, waiting 1@50",
        "available 0, waiting 1@99",
      ]);
      expect(bWaitingOn()).toContain("semaphore db");
      expect(whileHeld).toEqual(["available 0, waiting 0"]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });
  });

  describe("111: a cancelled waiter leaves the queue at once", () => {
    it("cancelling B at 50 empties the queue then, and the permit goes to C at 100", async () => {
      const h = createHarness();
      const sem = createSemaphore(1, { name: "db" });
      const bRan: string[] = [];
      const probes: string[] = [];
      const a = h.run(function* A() {
        yield* sem.use(sleep(100));
      });
      const b = h.run(function* B() {
        yield* sleep(10);
        yield* sem.use(function* workB() {
          bRan.push(`B.body@${h.clock.now()}`);
        });
      });
      const c = h.run(function* C() {
        yield* sleep(60);
        yield* sem.use(function* workC() {
          h.mark("C.acquired");
          yield* sleep(10);
        });
      });
      for (const at of [10, 50, 60]) probeAt(h, probes, at, () => books(sem));
      cancelAt(h, b, 50);

      expect(await rejection(b)).toBeInstanceOf(TaskCancelledError);
      await a;
      await c;
      expect(probes).toEqual([
        "available 0, waiting 1@10",
        "available 0, waiting 0@50",
        "available 0, waiting 1@60",
      ]);
      expect(h.log).toEqual(["C.acquired@100"]);
      expect(bRan).toEqual([]);
      expect(b.state).toBe("cancelled");
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });

    it("a waiter cancelled by its own race returns the sleep's value at 50 with the same queue state", async () => {
      const h = createHarness();
      const sem = createSemaphore(1, { name: "db" });
      const bRan: string[] = [];
      const probes: string[] = [];
      const a = h.run(function* A() {
        yield* sem.use(sleep(100));
      });
      const b = h.run(function* B() {
        yield* sleep(10);
        const winner = yield* race([
          sem.use(function* workB() {
            bRan.push(`B.body@${h.clock.now()}`);
            return "worked";
          }),
          sleep(40),
        ]);
        h.mark(`B.race returned ${String(winner)}`);
        return winner;
      });
      const c = h.run(function* C() {
        yield* sleep(60);
        yield* sem.use(function* workC() {
          h.mark("C.acquired");
          yield* sleep(10);
        });
      });
      for (const at of [10, 50, 60]) probeAt(h, probes, at, () => books(sem));

      expect(await b).toBeUndefined();
      await a;
      await c;
      expect(probes).toEqual([
        "available 0, waiting 1@10",
        "available 0, waiting 0@50",
        "available 0, waiting 1@60",
      ]);
      expect(h.log).toEqual(["B.race returned undefined@50", "C.acquired@100"]);
      expect(bRan).toEqual([]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });
  });

  it("112: waiters are served in order and a releaser cannot jump the queue", async () => {
    const h = createHarness();
    const sem = createSemaphore(1, { name: "db" });
    const checks: string[] = [];
    const holding = (who: string) =>
      function* hold() {
        h.mark(`${who} granted`);
        yield* sleep(100);
      };
    const a = h.run(function* A() {
      yield* sem.use(holding("A"));
      checks.push(`${books(sem)}@${h.clock.now()}`);
      yield* sem.use(holding("A"));
      h.mark("A finished");
    });
    const b = h.run(function* B() {
      yield* sleep(10);
      yield* sem.use(holding("B"));
    });
    const c = h.run(function* C() {
      yield* sleep(20);
      yield* sem.use(holding("C"));
    });
    const probes: string[] = [];
    probeAt(h, probes, 100, () => books(sem));

    await Promise.all([a, b, c]);
    // Synchronously after A's first release the permit already belongs to B.
    expect(checks).toEqual(["available 0, waiting 1@100"]);
    // By the end of instant 100, A's second use waits behind C.
    expect(probes).toEqual(["available 0, waiting 2@100"]);
    expect(h.log).toEqual([
      "A granted@0",
      "B granted@100",
      "C granted@200",
      "A granted@300",
      "A finished@400",
    ]);
    expect(books(sem)).toBe("available 1, waiting 0");
    await h.expectClean();
  });

  describe("113: a permit cannot be released twice; bad permit counts", () => {
    it("releasing a permit twice is a no-op and available never exceeds the permit count", async () => {
      const h = createHarness();
      const sem = createSemaphore(1, { name: "db" });
      const seen: string[] = [];
      await h.run(function* A() {
        yield* scoped(function* block() {
          const p = yield* sem.acquire();
          seen.push(`acquired: ${books(sem)}`);
          p.release();
          seen.push(`first release: ${books(sem)}`);
          p.release();
          seen.push(`second release: ${books(sem)}`);
        });
        seen.push(`scope exited: ${books(sem)}`);
      });

      expect(seen).toEqual([
        "acquired: available 0, waiting 0",
        "first release: available 1, waiting 0",
        "second release: available 1, waiting 0",
        "scope exited: available 1, waiting 0",
      ]);
      await h.expectClean();
    });

    it.each([0, -1, Number.NaN, 1.5])("createSemaphore(%s) throws a RangeError naming permits", (n) => {
      expect(() => createSemaphore(n)).toThrow(RangeError);
      expect(() => createSemaphore(n)).toThrow(/permits/);
    });
  });

  describe("114: a bounded fan-out stops cleanly on failure", () => {
    const run114 = async (fanOut: "mapLimit" | "forEachLimit", item5CleanupThrows: boolean) => {
      const h = createHarness();
      const shared = createSemaphore(3);
      const e4 = new Error("E4");
      const e5 = new Error("E5");
      let calls = 0;
      let running = 0;
      let maxRunning = 0;
      function* item(n: number): Operation<number> {
        calls++;
        running++;
        maxRunning = Math.max(maxRunning, running);
        h.mark(`start ${n}`);
        try {
          return yield* shared.use(function* work() {
            try {
              if (n === 4) {
                yield* sleep(50);
                throw e4;
              }
              yield* sleep(100);
              h.mark(`done ${n}`);
              return n * 10;
            } catch (e) {
              if (isCancelled(e)) {
                h.mark(`cancelled ${n}`);
                try {
                  yield* sleep(20);
                } finally {
                  h.mark(`cleaned ${n}`);
                }
                if (n === 5 && item5CleanupThrows) throw e5;
              }
              throw e;
            }
          });
        } finally {
          running--;
        }
      }
      const items = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
      let caught: unknown;
      await h.run(function* caller() {
        try {
          if (fanOut === "mapLimit") yield* mapLimit(items, 3, item);
          else yield* forEachLimit(items, 3, item);
        } catch (e) {
          caught = e;
          h.mark("caught E4");
        }
      });

      expect(byInstant(h.log)).toEqual([
        new Set(["start 1@0", "start 2@0", "start 3@0"]),
        new Set(["done 1@100", "done 2@100", "done 3@100", "start 4@100", "start 5@100", "start 6@100"]),
        new Set(["cancelled 5@150", "cancelled 6@150"]),
        new Set(["cleaned 5@170", "cleaned 6@170", "caught E4@170"]),
      ]);
      expect(h.log[h.log.length - 1]).toBe("caught E4@170");
      expect(caught).toBe(e4);
      expect(suppressedOf(caught)).toEqual(item5CleanupThrows ? [e5] : []);
      expect(calls).toBe(6);
      expect(maxRunning).toBe(3);
      expect(books(shared)).toBe("available 3, waiting 0");
      expect(h.liveTasks).toBe(0);
      await h.expectClean();
    };

    it("mapLimit cancels the running items on the first failure and throws it after their cleanup", async () => {
      await run114("mapLimit", false);
    });

    it("mapLimit attaches an error thrown by a cancelled item's cleanup to the primary's suppressed", async () => {
      await run114("mapLimit", true);
    });

    it("forEachLimit cancels the running items on the first failure and throws it after their cleanup", async () => {
      await run114("forEachLimit", false);
    });

    it("forEachLimit attaches an error thrown by a cancelled item's cleanup to the primary's suppressed", async () => {
      await run114("forEachLimit", true);
    });
  });

  describe("115: a permit acquired without use is still returned when its scope ends", () => {
    it("a task that never releases its permit gives it back when it ends at 50", async () => {
      const h = createHarness();
      const sem = createSemaphore(1, { name: "db" });
      const a = h.run(function* A() {
        yield* sem.acquire();
        yield* sleep(50);
        return "a";
      });
      const b = h.run(function* B() {
        yield* sleep(10);
        yield* sem.use(function* work() {
          h.mark("B.acquired");
        });
      });

      expect(await a).toBe("a");
      await b;
      expect(h.log).toEqual(["B.acquired@50"]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });

    it("a permit acquired inside scoped() is returned when that block exits at 50, not when the task ends", async () => {
      const h = createHarness();
      const sem = createSemaphore(1, { name: "db" });
      const a = h.run(function* A() {
        yield* scoped(function* block() {
          yield* sem.acquire();
          yield* sleep(50);
        });
        h.mark("A.block exited");
        yield* sleep(250);
        h.mark("A.ended");
      });
      const b = h.run(function* B() {
        yield* sleep(10);
        yield* sem.use(function* work() {
          h.mark("B.acquired");
        });
      });

      await Promise.all([a, b]);
      expect(byInstant(h.log)).toEqual([
        new Set(["A.block exited@50", "B.acquired@50"]),
        new Set(["A.ended@300"]),
      ]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });

    it("a permit returned out of its scope is already released, and releasing it again is a no-op", async () => {
      const h = createHarness();
      const sem = createSemaphore(1, { name: "db" });
      const seen: string[] = [];
      await h.run(function* A() {
        const p = yield* scoped(() => sem.acquire());
        seen.push(`after scoped: ${books(sem)}`);
        p.release();
        seen.push(`after release: ${books(sem)}`);
        // Still a working semaphore with exactly one permit.
        const other = yield* spawn(function* other() {
          yield* sem.acquire();
          seen.push(`other holds: ${books(sem)}`);
        });
        yield* other;
      });

      expect(seen).toEqual([
        "after scoped: available 1, waiting 0",
        "after release: available 1, waiting 0",
        "other holds: available 0, waiting 0",
      ]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });
  });

  it("115b: a rate limiter starts with a full bucket and never lends a token to a cancelled waiter", async () => {
    const h = createHarness();
    const limiter = createRateLimiter({ perSecond: 10, burst: 3 });
    const takers = [1, 2, 3, 4, 5].map((n) =>
      h.run(
        function* taker() {
          yield* limiter.take();
          h.mark(`T${n} took`);
        },
        { name: `T${n}` },
      ),
    );
    const sixth = h.run(function* T6() {
      yield* sleep(150);
      yield* limiter.take();
      h.mark("T6 took");
    });
    cancelAt(h, takers[4]!, 50);
    const probes: string[] = [];
    probeAt(h, probes, 50, () => `waiting ${limiter.waiting}`);

    expect(await rejection(takers[4]!)).toBeInstanceOf(TaskCancelledError);
    await Promise.all([...takers.slice(0, 4), sixth]);
    expect(byInstant(h.log)).toEqual([
      new Set(["T1 took@0", "T2 took@0", "T3 took@0"]),
      new Set(["T4 took@100"]),
      new Set(["T6 took@200"]),
    ]);
    expect(probes).toEqual(["waiting 1@50"]);
    expect(limiter.waiting).toBe(0);
    expect(h.clock.pendingTimers).toBe(0);
    await h.expectClean();
  });
});

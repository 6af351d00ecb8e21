/**
 * Conformance section J: races at the edges (cases 121–125 of design/conformance.md), the parts that
 * need no HTTP (the `getJson` variant of 121 belongs with the HTTP suite).
 */
import {
  all,
  isCancelled,
  isTimeoutError,
  now,
  race,
  scoped,
  sleep,
  spawn,
  type Task,
  TaskCancelledError,
  TimeoutError,
  timeout,
  timeoutAt,
  until,
} from "@keel/core";
import { createHarness, type Harness } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { kindOf, suppressedOf } from "../support/errors.js";
import { settleOfNamed } from "../support/events.js";
import { byInstant } from "../support/log.js";

class ZeroDivError extends Error {
  override name = "ZeroDivError";
}
class ValueError extends Error {
  override name = "ValueError";
}

describe("J. Races at the edges", () => {
  describe("121: a result one tick before the deadline wins", () => {
    for (const [label, enter] of [
      ["timeout(100, op)", (op: () => Generator<unknown, string>) => timeout(100, op)],
      ["timeoutAt(100, op)", (op: () => Generator<unknown, string>) => timeoutAt(100, op)],
    ] as const) {
      it(`121: ${label} returns "v" at 99, disarms its timer and leaves the count at 0`, async () => {
        const h = createHarness();
        const seen: { value?: string; pendingTimers?: number; count?: number } = {};
        const t: Task<void> = h.run(function* caller() {
          seen.value = yield* enter(function* op() {
            yield* sleep(99);
            return "v";
          });
          seen.pendingTimers = h.clock.pendingTimers;
          seen.count = t.cancellationCount;
          h.mark(`got ${seen.value}`);
        });

        await t;

        expect(h.log).toEqual(["got v@99"]);
        expect(seen).toEqual({ value: "v", pendingTimers: 0, count: 0 });
        expect(t.state).toBe("completed");
        const eventsAfterRun = h.events.length;
        h.clock.advance(10);
        expect(h.clock.now()).toBe(109);
        expect(h.events.length).toBe(eventsAfterRun);
        expect(h.eventsOf("timeout:fire")).toEqual([]);
        expect(h.eventsOf("cancel:request")).toEqual([]);
        expect(h.log).toEqual(["got v@99"]);
        await h.expectClean();
      });
    }
  });

  describe("122: a value delivered but not yet consumed loses to a cancellation", () => {
    it("122: a promise resolved and a cancel made in one timer callback: T is cancelled and never sees 42", async () => {
      const h = createHarness();
      let resolve!: (v: number) => void;
      const p = new Promise<number>((r) => {
        resolve = r;
      });
      const t = h.run(function* T() {
        try {
          const x = yield* until(p);
          h.mark(`got ${x}`);
        } finally {
          h.mark("T.fin");
        }
      });
      h.clock.schedule(10, () => {
        resolve(42);
        t.cancel();
      });

      await expect(t).rejects.toBeInstanceOf(TaskCancelledError);

      expect(h.log).toEqual(["T.fin@10"]);
      expect(settleOfNamed(h, "T")).toMatchObject({ state: "cancelled", at: 10 });
      await h.expectClean();
    });

    it("122 (join): a joined task's value queued for T loses to a cancel at the same instant; the joined task is untouched", async () => {
      const h = createHarness();
      let f!: Task<number>;
      let t!: Task<void>;
      await h.run(function* parent() {
        f = yield* spawn(function* F() {
          yield* sleep(10);
          return 42;
        });
        t = yield* spawn(function* T() {
          try {
            const x = yield* f;
            h.mark(`T got ${x}`);
          } finally {
            h.mark("T.fin");
          }
        });
        // G's sleep(10) is registered after F's (children start in spawn order).
        const g = yield* spawn(function* G() {
          yield* sleep(10);
          yield* t.cancel();
        });
        const other = yield* f;
        h.mark(`other joiner got ${other}`);
        yield* g;
      });

      expect(byInstant(h.log)).toEqual(byInstant(["T.fin@10", "other joiner got 42@10"]));
      expect(t.state).toBe("cancelled");
      expect(settleOfNamed(h, "T")).toMatchObject({ state: "cancelled", at: 10 });
      expect(f.state).toBe("completed");
      expect(settleOfNamed(h, "F")).toMatchObject({ state: "completed", at: 10 });
      await h.expectClean();
    });

    it("122 (all): an all() result queued for T loses to a cancel at the same instant", async () => {
      const h = createHarness();
      let t!: Task<void>;
      await h.run(function* parent() {
        t = yield* spawn(function* T() {
          try {
            const xs = yield* all([
              function* c1() {
                yield* sleep(5);
                return 1;
              },
              function* c2() {
                yield* sleep(10);
                return 2;
              },
            ]);
            h.mark(`T got ${JSON.stringify(xs)}`);
          } finally {
            h.mark("T.fin");
          }
        });
        // One promise hop: T enters all() and c1, c2 register their timers in the current drain, so
        // G's sleep(10), registered after this, comes after the last child's.
        yield* until(Promise.resolve());
        const g = yield* spawn(function* G() {
          yield* sleep(10);
          yield* t.cancel();
        });
        yield* g;
      });

      expect(h.log).toEqual(["T.fin@10"]);
      expect(t.state).toBe("cancelled");
      expect(settleOfNamed(h, "T")).toMatchObject({ state: "cancelled", at: 10 });
      expect(settleOfNamed(h, "c2")).toMatchObject({ state: "completed", at: 10 });
      await h.expectClean();
    });
  });

  describe("123: two results in the same instant: registration order decides", () => {
    it("123: race([A, B]) with both due at 100 returns A's value on every one of 100 runs", async () => {
      const outcomes: string[] = [];
      for (let run = 0; run < 100; run++) {
        const h = createHarness();
        await h.run(function* caller() {
          const v = yield* race([
            function* A() {
              yield* sleep(100);
              return "a";
            },
            function* B() {
              try {
                yield* sleep(100);
                return "b";
              } finally {
                h.mark("B.fin");
              }
            },
          ]);
          h.mark(`race returned ${v}`);
        });
        expect(h.log).toEqual(["B.fin@100", "race returned a@100"]);
        expect(settleOfNamed(h, "B")).toMatchObject({ state: "cancelled", at: 100 });
        await h.expectClean();
        outcomes.push(h.log.at(-1)!);
      }
      expect(outcomes).toEqual(Array(100).fill("race returned a@100"));
    });

    it("123 (variant): when B's timer is registered first, B wins on every one of 100 runs", async () => {
      const outcomes: string[] = [];
      for (let run = 0; run < 100; run++) {
        const h = createHarness();
        await h.run(function* caller() {
          const v = yield* race([
            function* A() {
              try {
                yield* sleep(50);
                yield* sleep(50);
                return "a";
              } finally {
                h.mark("A.fin");
              }
            },
            function* B() {
              yield* sleep(100);
              return "b";
            },
          ]);
          h.mark(`race returned ${v}`);
        });
        expect(h.log).toEqual(["A.fin@100", "race returned b@100"]);
        expect(settleOfNamed(h, "A")).toMatchObject({ state: "cancelled", at: 100 });
        await h.expectClean();
        outcomes.push(h.log.at(-1)!);
      }
      expect(outcomes).toEqual(Array(100).fill("race returned b@100"));
    });

    it("123 (errors): when both throw at 100, race throws A's error on every one of 100 runs; B's never happens", async () => {
      for (let run = 0; run < 100; run++) {
        const h = createHarness();
        const eA = new Error("eA");
        const eB = new Error("eB");
        let caught: unknown;
        await h.run(function* caller() {
          try {
            yield* race([
              function* A() {
                yield* sleep(100);
                throw eA;
              },
              function* B() {
                try {
                  yield* sleep(100);
                  h.mark("B throws");
                  throw eB;
                } finally {
                  h.mark("B.fin");
                }
              },
            ]);
          } catch (e) {
            caught = e;
            h.mark("race threw");
          }
        });
        expect(h.log).toEqual(["B.fin@100", "race threw@100"]);
        expect(caught).toBe(eA);
        expect(suppressedOf(eA)).toEqual([]);
        expect(settleOfNamed(h, "B")).toMatchObject({ state: "cancelled", at: 100 });
        await h.expectClean();
      }
    });
  });

  describe("124: the auto-jumping clock and code that never yields", () => {
    it("124a: with every task blocked, time jumps to the timers at 500 and 700 in about no real time", async () => {
      const h = createHarness();
      const realStart = performance.now();
      await h.run(function* caller() {
        const first = yield* spawn(function* sleeper500() {
          yield* sleep(500);
          h.mark(`now ${yield* now()}`);
        });
        const second = yield* spawn(function* sleeper700() {
          yield* sleep(700);
          h.mark(`now ${yield* now()}`);
        });
        yield* first;
        yield* second;
      });
      const realMs = performance.now() - realStart;

      expect(h.log).toEqual(["now 500@500", "now 700@700"]);
      // Generous for a slow shared machine, yet far below the 700 ms a real clock would take.
      expect(realMs).toBeLessThan(300);
      await h.expectClean();
    });

    it("124b: a long loop without a yield does not move time; the body returns at 5", async () => {
      const h = createHarness();
      let got: unknown;
      let caught: unknown;
      await h.run(function* caller() {
        try {
          got = yield* timeout(10, function* () {
            const before = yield* now();
            let sum = 0;
            for (let i = 0; i < 1_000_000; i++) sum += i;
            const after = yield* now();
            h.mark(`loop ${before}..${after} sum ${sum > 0}`);
            yield* sleep(5);
            return "done";
          });
          h.mark("returned");
        } catch (e) {
          caught = e;
        }
      });

      expect(h.log).toEqual(["loop 0..0 sum true@0", "returned@5"]);
      expect(got).toBe("done");
      expect(caught).toBeUndefined();
      expect(h.eventsOf("timeout:fire")).toEqual([]);
      await h.expectClean();
    });

    it("124c: a timer that fires inside a synchronous stretch is delivered at the next suspension point", async () => {
      const h = createHarness();
      let caught: unknown;
      await h.run(function* caller() {
        try {
          yield* timeout(10, function* () {
            h.clock.advance(20);
            h.mark(`after (fired ${h.eventsOf("timeout:fire").length})`);
            try {
              yield* sleep(1);
            } catch (e) {
              h.mark(`sleep threw ${kindOf(e)}`);
              throw e;
            }
            h.mark("unreachable");
          });
        } catch (e) {
          caught = e;
          h.mark(`timeout threw ${kindOf(e)}`);
        }
      });

      expect(h.log).toEqual([
        "after (fired 1)@20",
        "sleep threw Cancelled@20",
        "timeout threw TimeoutError@20",
      ]);
      expect(caught).toBeInstanceOf(TimeoutError);
      expect(caught).toMatchObject({ timeoutMs: 10, elapsedMs: 20 });
      await h.expectClean();
    });

    it("124d: a value returned after the deadline passed inside a synchronous stretch is dropped, with no swallow", async () => {
      const h = createHarness();
      let got: unknown;
      let caught: unknown;
      await h.run(function* caller() {
        try {
          got = yield* timeout(10, function* () {
            h.clock.advance(20);
            return "v";
          });
          h.mark("returned");
        } catch (e) {
          caught = e;
          h.mark(`timeout threw ${kindOf(e)}`);
        }
      });

      expect(h.log).toEqual(["timeout threw TimeoutError@20"]);
      expect(got).toBeUndefined();
      expect(caught).toBeInstanceOf(TimeoutError);
      expect(caught).toMatchObject({ timeoutMs: 10, elapsedMs: 20 });
      expect(h.eventsOf("cleanup:swallow")).toEqual([]);
      await h.expectClean();
    });
  });

  describe("125: a deadline, a body error and a child's cleanup error at once", () => {
    /** The case's scope: a child whose cleanup throws ZeroDiv, and a body that throws ValueErr. */
    function scenario(h: Harness, zeroDiv: ZeroDivError, finallyYields: boolean) {
      return scoped(function* () {
        yield* spawn(function* child() {
          try {
            yield* sleep(2000);
          } finally {
            h.mark("child.fin");
            // biome-ignore lint/correctness/noUnsafeFinally: the case is exactly a finally that throws.
            throw zeroDiv;
          }
        });
        if (!finallyYields) {
          // Reading of the variant: the child must have started for its finally to throw, and a
          // child cancelled before its first turn runs no code (semantics §2); one zero-time hop
          // lets it start. The body's finally itself does not yield.
          yield* sleep(0);
        }
        try {
          throw new ValueError("ValueErr");
        } finally {
          if (finallyYields) {
            try {
              yield* sleep(1000);
            } catch (e) {
              h.mark(`body.fin sleep threw ${kindOf(e)}`);
              // biome-ignore lint/correctness/noUnsafeFinally: rethrows what the finally's sleep threw.
              throw e;
            }
          } else {
            h.mark("body.fin");
          }
        }
      });
    }

    it("125: the child's cleanup error wins, with the TimeoutError in its suppressed and the replacement reported", async () => {
      const h = createHarness();
      const zeroDiv = new ZeroDivError("ZeroDiv");
      let caught: unknown;
      await h.run(function* caller() {
        try {
          yield* timeout(10, function* () {
            try {
              return yield* scenario(h, zeroDiv, true);
            } catch (e) {
              h.mark(`scoped threw ${kindOf(e)}`);
              throw e;
            }
          });
        } catch (e) {
          caught = e;
          h.mark(`timeout threw ${kindOf(e)}`);
        }
      });

      expect(byInstant(h.log)).toEqual(
        byInstant([
          "body.fin sleep threw Cancelled@10",
          "child.fin@10",
          "scoped threw ZeroDivError@10",
          "timeout threw ZeroDivError@10",
        ]),
      );
      expect(h.log.slice(-2)).toEqual(["scoped threw ZeroDivError@10", "timeout threw ZeroDivError@10"]);
      expect(caught).toBe(zeroDiv);
      const descriptor = Object.getOwnPropertyDescriptor(zeroDiv, "suppressed");
      expect(descriptor?.enumerable).toBe(false);
      const suppressed = suppressedOf(zeroDiv);
      expect(suppressed).toHaveLength(1);
      expect(suppressed[0]).toBeInstanceOf(TimeoutError);
      expect(suppressed[0]).toMatchObject({ timeoutMs: 10 });
      expect(suppressed.some((x) => isCancelled(x))).toBe(false);
      const replaced = h.eventsOf("cancel:replaced").filter((e) => e.error === zeroDiv);
      expect(replaced.length).toBeGreaterThanOrEqual(1);
      expect(replaced.every((e) => e.at === 10)).toBe(true);
      expect(settleOfNamed(h, "child")).toMatchObject({ state: "failed", at: 10 });
      await h.expectClean();
    });

    it("125 (variant): with a finally that does not yield, ValueErr escapes at 0 carrying ZeroDiv, untouched by timeout", async () => {
      const h = createHarness();
      const zeroDiv = new ZeroDivError("ZeroDiv");
      let caught: unknown;
      await h.run(function* caller() {
        try {
          yield* timeout(10, scenario(h, zeroDiv, false));
        } catch (e) {
          caught = e;
          h.mark(`timeout threw ${kindOf(e)}`);
        }
      });

      expect(byInstant(h.log)).toEqual(
        byInstant(["body.fin@0", "child.fin@0", "timeout threw ValueError@0"]),
      );
      expect(h.log.at(-1)).toBe("timeout threw ValueError@0");
      expect(caught).toBeInstanceOf(ValueError);
      expect(suppressedOf(caught)).toEqual([zeroDiv]);
      expect(suppressedOf(caught)[0]).toBe(zeroDiv);
      expect(settleOfNamed(h, "child")).toMatchObject({ state: "failed", at: 0 });
      expect(h.eventsOf("timeout:fire")).toEqual([]);
      await h.expectClean();
    });

    for (const order of ["before", "after"] as const) {
      it(`125 (external cancel at the timer's instant, its timer registered ${order} the timeout's): the task fails with ZeroDiv and no TimeoutError exists anywhere`, async () => {
        const h = createHarness();
        const zeroDiv = new ZeroDivError("ZeroDiv");
        // The outside cancel is made by a timer callback, so it is due in the same turn as the
        // timeout's timer (semantics §3: both are counted before any Cancelled is delivered).
        const cancelAt10 = () =>
          h.clock.schedule(10, () => {
            t.cancel();
          });
        const t: Task<void> = h.run(function* caller() {
          try {
            yield* timeout(10, function* () {
              if (order === "after") cancelAt10();
              return yield* scenario(h, zeroDiv, true);
            });
          } catch (e) {
            h.mark(`timeout threw ${kindOf(e)}`);
            throw e;
          }
        });
        if (order === "before") cancelAt10();

        await expect(t).rejects.toBe(zeroDiv);

        expect(byInstant(h.log)).toEqual(
          byInstant(["body.fin sleep threw Cancelled@10", "child.fin@10", "timeout threw ZeroDivError@10"]),
        );
        expect(t.state).toBe("failed");
        expect(settleOfNamed(h, "caller")).toMatchObject({ state: "failed", at: 10 });
        expect(suppressedOf(zeroDiv).some((x) => isTimeoutError(x) || isCancelled(x))).toBe(false);
        const errorsSeen = [
          ...h.eventsOf("task:settle").map((e) => e.error),
          ...h.eventsOf("error:suppressed").map((e) => e.error),
          ...h.eventsOf("cancel:replaced").map((e) => e.error),
        ];
        expect(errorsSeen.some((x) => isTimeoutError(x))).toBe(false);
        expect(h.eventsOf("cancel:replaced").some((e) => e.taskId === t.id && e.error === zeroDiv)).toBe(
          true,
        );
        await h.expectClean();
      });
    }
  });
});

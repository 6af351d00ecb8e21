/**
 * Conformance section F: groups, `scoped`, `all` and `race` (cases 43–55 of design/conformance.md;
 * semantics §2, §7).
 */
import {
  all,
  isCancelled,
  type Operation,
  race,
  scoped,
  sleep,
  spawn,
  suspend,
  type Task,
  TaskCancelledError,
} from "@keel/core";
import { createHarness, type Harness } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { suppressedOf } from "../support/errors.js";
import { settleOfNamed } from "../support/events.js";
import { byInstant } from "../support/log.js";
import { cancellerAt } from "../support/timing.js";

/** What a `catch` saw, in one word: `Cancelled`, or the error's name or message. */
function kindOf(e: unknown): string {
  if (isCancelled(e)) return "Cancelled";
  return e instanceof Error ? e.message : String(e);
}

describe("F. Groups: scoped, all, race", () => {
  it("43: all() cancels the siblings on the first failure and throws it after their cleanup", async () => {
    const h = createHarness();
    const e = new Error("e");
    let caught: unknown;
    await h.run(function* caller() {
      try {
        yield* all([
          function* A() {
            yield* sleep(100);
            throw e;
          },
          function* B() {
            try {
              yield* sleep(500);
            } finally {
              h.mark("B.start");
              yield* sleep(20);
              h.mark("B.done");
            }
          },
        ]);
      } catch (err) {
        caught = err;
        h.mark("all threw");
      }
    });

    expect(h.log).toEqual(["B.start@100", "B.done@120", "all threw@120"]);
    expect(caught).toBe(e);
    expect(settleOfNamed(h, "A")).toMatchObject({ state: "failed", at: 100 });
    expect(settleOfNamed(h, "B")).toMatchObject({ state: "cancelled", at: 120 });
    await h.expectClean();
  });

  it("44: all() is not gather: after it rejects nothing keeps running", async () => {
    const h = createHarness();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => {
      unhandled.push(reason);
    };
    process.on("unhandledRejection", onUnhandled);
    try {
      const e = new Error("e");
      const t = h.run(
        all([
          function* A() {
            yield* sleep(100);
            throw e;
          },
          function* B() {
            yield* sleep(500);
            h.mark("write");
          },
        ]),
      );

      const rejection = await t.then(
        () => undefined,
        (err: unknown) => err,
      );

      expect(rejection).toBe(e);
      expect(h.clock.now()).toBe(100);
      expect(settleOfNamed(h, "B")).toMatchObject({ state: "cancelled", at: 100 });
      expect(h.clock.pendingTimerInstants).not.toContain(500);
      h.clock.advance(1000);
      expect(h.log).toEqual([]);
      await h.expectClean();
      await new Promise<void>((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  it("45: all([]) returns [] at once, without suspending", async () => {
    const h = createHarness();
    const step = all([])[Symbol.iterator]().next();
    expect(step).toEqual({ done: true, value: [] });

    let got: unknown;
    await h.run(function* caller() {
      got = yield* all([]);
      h.mark("all returned");
    });

    expect(got).toEqual([]);
    expect(h.log).toEqual(["all returned@0"]);
    await h.expectClean();
  });

  it("45: race([]) throws RangeError from the call itself", async () => {
    const h = createHarness();
    expect(() => race([])).toThrow(RangeError);
    let caught: unknown;
    await h.run(function* caller() {
      try {
        yield* race([]);
      } catch (e) {
        caught = e;
      }
    });
    expect(caught).toBeInstanceOf(RangeError);
    await h.expectClean();
  });

  it("45: all() returns the values in input order, not in completion order", async () => {
    const h = createHarness();
    let got: unknown;
    await h.run(function* caller() {
      got = yield* all([
        function* A() {
          yield* sleep(300);
          return "a";
        },
        function* B() {
          yield* sleep(100);
          return "b";
        },
      ]);
      h.mark("all returned");
    });

    expect(got).toEqual(["a", "b"]);
    expect(h.log).toEqual(["all returned@300"]);
    await h.expectClean();
  });

  it("46: race() returns the first value after the losers' cleanup", async () => {
    const h = createHarness();
    let got: unknown;
    await h.run(function* caller() {
      got = yield* race([
        function* A() {
          yield* sleep(100);
          return "a";
        },
        function* B() {
          try {
            yield* sleep(200);
            h.mark("B produced b");
            return "b";
          } finally {
            h.mark("B.fin");
            yield* sleep(30);
          }
        },
      ]);
      h.mark("race returned");
    });

    expect(got).toBe("a");
    expect(h.log).toEqual(["B.fin@100", "race returned@130"]);
    expect(settleOfNamed(h, "B")).toMatchObject({ state: "cancelled", at: 130 });
    await h.expectClean();
  });

  it("47: race() lets an error win and cancels the others", async () => {
    const h = createHarness();
    const e = new Error("e");
    let caught: unknown;
    await h.run(function* caller() {
      try {
        yield* race([
          function* A() {
            yield* sleep(100);
            throw e;
          },
          function* B() {
            try {
              yield* sleep(200);
              return "b";
            } finally {
              h.mark("B.fin");
            }
          },
        ]);
      } catch (err) {
        caught = err;
        h.mark("race threw");
      }
    });

    expect(h.log).toEqual(["B.fin@100", "race threw@100"]);
    expect(caught).toBe(e);
    expect(settleOfNamed(h, "A")).toMatchObject({ state: "failed", at: 100 });
    expect(settleOfNamed(h, "B")).toMatchObject({ state: "cancelled", at: 100 });
    await h.expectClean();
  });

  it("48: a scope whose own body fails cancels its running children and throws the body's error", async () => {
    const h = createHarness();
    const zeroDiv = new Error("zeroDiv");
    let caught: unknown;
    await h.run(function* caller() {
      try {
        yield* scoped(function* () {
          yield* spawn(function* t1() {
            try {
              yield* sleep(1000);
            } finally {
              h.mark("t1.fin");
            }
          });
          yield* spawn(function* t2() {
            try {
              yield* sleep(2000);
            } finally {
              h.mark("t2.fin");
            }
          });
          yield* sleep(100);
          throw zeroDiv;
        });
      } catch (e) {
        caught = e;
        h.mark("scoped threw");
      }
    });

    expect(byInstant(h.log)).toEqual(byInstant(["t1.fin@100", "t2.fin@100", "scoped threw@100"]));
    expect(h.log[2]).toBe("scoped threw@100");
    expect(caught).toBe(zeroDiv);
    expect(settleOfNamed(h, "t1")).toMatchObject({ state: "cancelled", at: 100 });
    expect(settleOfNamed(h, "t2")).toMatchObject({ state: "cancelled", at: 100 });
    await h.expectClean();
  });

  it("48 (variant): a body that throws before any suspension fails the scope at 0 and cancels the children", async () => {
    const h = createHarness();
    const zeroDiv = new Error("zeroDiv");
    let caught: unknown;
    await h.run(function* caller() {
      try {
        yield* scoped(function* () {
          yield* spawn(function* t1() {
            try {
              yield* sleep(1000);
            } finally {
              h.mark("t1.fin");
            }
          });
          yield* spawn(function* t2() {
            try {
              yield* sleep(2000);
            } finally {
              h.mark("t2.fin");
            }
          });
          throw zeroDiv;
        });
      } catch (e) {
        caught = e;
        h.mark("scoped threw");
      }
    });

    // The children were cancelled before their first turn, so none of their code ran (semantics §2).
    expect(h.log).toEqual(["scoped threw@0"]);
    expect(caught).toBe(zeroDiv);
    expect(settleOfNamed(h, "t1")).toMatchObject({ state: "cancelled", at: 0 });
    expect(settleOfNamed(h, "t2")).toMatchObject({ state: "cancelled", at: 0 });
    await h.expectClean();
  });

  it("49: a child's failure cancels the waiting body and the other children; later errors never happen", async () => {
    const h = createHarness();
    const [e1, e2, e3] = [new Error("e1"), new Error("e2"), new Error("e3")];
    const failing = (name: string, ms: number, error: Error) =>
      spawn(
        function* () {
          yield* sleep(ms);
          h.mark(`${name}.throw`);
          throw error;
        },
        { name },
      );
    const t = h.run(function* caller() {
      try {
        yield* scoped(function* () {
          yield* failing("c1", 100, e1);
          yield* failing("c2", 150, e2);
          yield* failing("c3", 200, e3);
          yield* spawn(function* D() {
            yield* sleep(5000);
          });
          try {
            yield* sleep(10000);
          } finally {
            h.mark("body.fin");
          }
        });
      } catch (e) {
        h.mark(`scoped threw ${kindOf(e)}`);
        throw e;
      }
      h.mark("after");
    });

    let caught: unknown;
    await t.then(undefined, (e: unknown) => {
      caught = e;
    });

    expect(byInstant(h.log)).toEqual(byInstant(["c1.throw@100", "body.fin@100", "scoped threw e1@100"]));
    expect(h.log[2]).toBe("scoped threw e1@100");
    expect(caught).toBe(e1);
    expect(suppressedOf(e1)).toEqual([]);
    expect(h.eventsOf("error:suppressed")).toEqual([]);
    for (const name of ["c2", "c3", "D"]) {
      expect(settleOfNamed(h, name), name).toMatchObject({ state: "cancelled", at: 100 });
    }
    expect(settleOfNamed(h, "c1")).toMatchObject({ state: "failed", at: 100 });
    expect(t.state).toBe("failed");
    await h.expectClean();
  });

  it("50: cancelling one child does not fail the scope", async () => {
    const h = createHarness();
    let t1: Task<void> | undefined;
    let got: unknown;
    let joinError: unknown;
    await h.run(function* caller() {
      got = yield* scoped(function* () {
        t1 = yield* spawn(function* t1() {
          yield* sleep(1000);
        });
        const t2 = yield* spawn(function* t2() {
          yield* sleep(200);
          return 11;
        });
        yield* sleep(150);
        yield* t1.cancel();
        h.mark(`t1 ${t1.state}`);
        return yield* t2;
      });
      h.mark("scoped returned");
      try {
        yield* t1!;
      } catch (e) {
        joinError = e;
      }
    });

    expect(h.log).toEqual(["t1 cancelled@150", "scoped returned@200"]);
    expect(got).toBe(11);
    expect(settleOfNamed(h, "t1")).toMatchObject({ state: "cancelled", at: 150 });
    expect(h.eventsOf("cancel:request").filter((e) => e.reason.kind === "child-failed")).toEqual([]);
    expect(joinError).toBeInstanceOf(TaskCancelledError);
    await h.expectClean();
  });

  it("51: an inner scope's child failure reaches the outer scope as the identical error", async () => {
    const h = createHarness();
    const valueErr = new Error("valueErr");
    let caught: unknown;
    await h.run(function* caller() {
      try {
        yield* scoped(function* outer() {
          yield* spawn(function* c1() {
            yield* sleep(10000);
          });
          try {
            yield* scoped(function* inner() {
              yield* spawn(function* c2() {
                yield* sleep(100);
                throw valueErr;
              });
              yield* suspend();
            });
          } catch (e) {
            h.mark(`inner threw ${kindOf(e)}`);
            throw e;
          }
        });
      } catch (e) {
        caught = e;
        h.mark(`outer threw ${kindOf(e)}`);
      }
    });

    expect(h.log).toEqual(["inner threw valueErr@100", "outer threw valueErr@100"]);
    expect(caught).toBe(valueErr);
    expect(suppressedOf(valueErr)).toEqual([]);
    expect(settleOfNamed(h, "c1")).toMatchObject({ state: "cancelled", at: 100 });
    expect(settleOfNamed(h, "c2")).toMatchObject({ state: "failed", at: 100 });
    await h.expectClean();
  });

  it("52: an outer scope's child failure cancels the inner scope, which adds nothing", async () => {
    const h = createHarness();
    const valueErr = new Error("valueErr");
    let caught: unknown;
    await h.run(function* caller() {
      try {
        yield* scoped(function* outer() {
          yield* spawn(function* c1() {
            yield* sleep(100);
            throw valueErr;
          });
          yield* scoped(function* inner() {
            yield* spawn(function* c2() {
              try {
                yield* sleep(10000);
              } catch (e) {
                h.mark(`c2 saw ${kindOf(e)}:${isCancelled(e) ? e.reason.kind : "?"}`);
                throw e;
              }
            });
            try {
              yield* suspend();
            } catch (e) {
              h.mark(`inner saw ${kindOf(e)}:${isCancelled(e) ? e.reason.kind : "?"}`);
              throw e;
            }
          });
        });
      } catch (e) {
        caught = e;
        h.mark(`outer threw ${kindOf(e)}`);
      }
    });

    expect(byInstant(h.log)).toEqual(
      byInstant([
        "inner saw Cancelled:child-failed@100",
        "c2 saw Cancelled:child-failed@100",
        "outer threw valueErr@100",
      ]),
    );
    expect(h.log[2]).toBe("outer threw valueErr@100");
    expect(caught).toBe(valueErr);
    expect(suppressedOf(valueErr)).toEqual([]);
    expect(settleOfNamed(h, "c2")).toMatchObject({ state: "cancelled", at: 100 });
    await h.expectClean();
  });

  it("53: an owner cancelled from outside never resumes normal code, and its child never throws", async () => {
    const h = createHarness();
    const zeroDiv = new Error("zeroDiv");
    const r = h.run(function* r() {
      yield* scoped(function* () {
        yield* spawn(function* crash() {
          yield* sleep(300);
          h.mark("crash.throw");
          throw zeroDiv;
        });
        try {
          yield* sleep(10000);
        } catch (e) {
          h.mark(`saw:${isCancelled(e) ? e.reason.kind : kindOf(e)}`);
          throw e;
        } finally {
          yield* sleep(500);
          h.mark("r.fin done");
        }
      });
      h.mark("after");
    });
    cancellerAt(h, r, 100);

    await expect(r).rejects.toBeInstanceOf(TaskCancelledError);

    expect(byInstant(h.log)).toEqual(byInstant(["saw:cancel@100", "r.fin done@600", "r.cancel settled@600"]));
    expect(settleOfNamed(h, "crash")).toMatchObject({ state: "cancelled", at: 100 });
    expect(settleOfNamed(h, "r")).toMatchObject({ state: "cancelled", at: 600 });
    expect(r.state).toBe("cancelled");
    await h.expectClean();
  });

  it("54a: children are cancelled when the operation returns", async () => {
    const h = createHarness();
    let got: unknown;
    await h.run(function* caller() {
      got = yield* scoped(function* op() {
        yield* spawn(function* child() {
          yield* sleep(20);
          h.mark("child");
        });
        return 1;
      });
      h.mark("op returned");
    });

    expect(got).toBe(1);
    expect(h.log).toEqual(["op returned@0"]);
    expect(settleOfNamed(h, "child")).toMatchObject({ state: "cancelled", at: 0 });
    await h.expectClean();
  });

  it("54b: joining the child before returning waits for it", async () => {
    const h = createHarness();
    let got: unknown;
    await h.run(function* caller() {
      got = yield* scoped(function* op() {
        const t = yield* spawn(function* child() {
          yield* sleep(20);
          h.mark("child");
        });
        yield* t;
        return 1;
      });
      h.mark("op returned");
    });

    expect(got).toBe(1);
    expect(byInstant(h.log)).toEqual(byInstant(["child@20", "op returned@20"]));
    expect(settleOfNamed(h, "child")).toMatchObject({ state: "completed", at: 20 });
    await h.expectClean();
  });

  it("54c: all([child]) waits for the child", async () => {
    const h = createHarness();
    let got: unknown;
    await h.run(function* caller() {
      got = yield* all([
        function* child() {
          yield* sleep(20);
          h.mark("child");
          return 1;
        },
      ]);
      h.mark("all returned");
    });

    expect(got).toEqual([1]);
    expect(byInstant(h.log)).toEqual(byInstant(["child@20", "all returned@20"]));
    expect(settleOfNamed(h, "child")).toMatchObject({ state: "completed", at: 20 });
    await h.expectClean();
  });

  describe("55: supervision is a catch in the child, and it cannot keep a cancelled task alive", () => {
    /** The supervision wrapper of the case; `checkCancelled: false` is run 3 (no `isCancelled` line). */
    function supervisor(failures: unknown[], checkCancelled: boolean) {
      return function* supervise<T>(op: Operation<T>) {
        try {
          return yield* op;
        } catch (e) {
          if (checkCancelled && isCancelled(e)) throw e;
          failures.push(e);
        }
      };
    }

    function setup(h: Harness, checkCancelled: boolean) {
      const failures: unknown[] = [];
      const eA = new Error("A failed");
      const supervise = supervisor(failures, checkCancelled);
      function* A() {
        yield* sleep(10);
        throw eA;
      }
      function* B() {
        try {
          yield* sleep(100);
        } finally {
          h.mark("B.fin");
        }
      }
      const task = h.run(function* main() {
        yield* scoped(function* () {
          const a = yield* spawn(() => supervise(A()), { name: "A" });
          const b = yield* spawn(() => supervise(B()), { name: "B" });
          yield* a;
          yield* b;
        });
        h.mark("scoped returned");
      });
      return { failures, eA, task };
    }

    it("55 run 1: a supervised failure is recorded and the sibling completes", async () => {
      const h = createHarness();
      const { failures, eA, task } = setup(h, true);

      await task;

      expect(failures).toHaveLength(1);
      expect(failures[0]).toBe(eA);
      expect(byInstant(h.log)).toEqual(byInstant(["B.fin@100", "scoped returned@100"]));
      expect(settleOfNamed(h, "B")).toMatchObject({ state: "completed", at: 100 });
      expect(settleOfNamed(h, "A")).toMatchObject({ state: "completed", at: 10 });
      await h.expectClean();
    });

    it("55 run 2: cancelling the task cancels the supervised child; the failures are unchanged", async () => {
      const h = createHarness();
      const { failures, eA, task } = setup(h, true);
      cancellerAt(h, task, 50);

      await expect(task).rejects.toBeInstanceOf(TaskCancelledError);

      expect(failures).toHaveLength(1);
      expect(failures[0]).toBe(eA);
      expect(byInstant(h.log)).toEqual(byInstant(["B.fin@50", "main.cancel settled@50"]));
      expect(settleOfNamed(h, "B")).toMatchObject({ state: "cancelled", at: 50 });
      expect(settleOfNamed(h, "main")).toMatchObject({ state: "cancelled", at: 50 });
      await h.expectClean();
    });

    it("55 run 3: a wrapper that records Cancelled and returns still ends cancelled, with a swallow event", async () => {
      const h = createHarness();
      const { failures, eA, task } = setup(h, false);
      cancellerAt(h, task, 50);

      await expect(task).rejects.toBeInstanceOf(TaskCancelledError);

      expect(failures).toHaveLength(2);
      expect(failures[0]).toBe(eA);
      expect(isCancelled(failures[1])).toBe(true);
      expect(byInstant(h.log)).toEqual(byInstant(["B.fin@50", "main.cancel settled@50"]));
      const b = settleOfNamed(h, "B");
      expect(b).toMatchObject({ state: "cancelled", at: 50 });
      const swallows = h.eventsOf("cleanup:swallow").filter((e) => e.taskId === b!.taskId);
      expect(swallows).toHaveLength(1);
      expect(swallows[0]!.at).toBe(50);
      await h.expectClean();
    });
  });
});

/**
 * Conformance section A, "Timeouts and ownership" (cases 1–12 of design/conformance.md).
 */
import {
  all,
  Cancelled,
  isCancelled,
  type Op,
  type Operation,
  deadline as readDeadline,
  now as readNow,
  remaining as readRemaining,
  scoped,
  shield,
  sleep,
  spawn,
  suspend,
  type Task,
  TimeoutError,
  timeout,
  timeoutAt,
  withCleanupBudget,
} from "@keel/core";
import { createHarness, type Harness } from "@keel/testing";
import { describe, expect, it, vi } from "vitest";
import { rejectionOf } from "../support/errors.js";
import { scopeLabels } from "../support/events.js";
import { expectLog } from "../support/log.js";

/** The settle event of the task the harness saw start under `name`. */
function settleOf(h: Harness, name: string) {
  const started = h.eventsOf("task:start").filter((e) => e.name === name);
  expect(started, `tasks named ${name}`).toHaveLength(1);
  const settled = h.eventsOf("task:settle").filter((e) => e.taskId === started[0]!.taskId);
  expect(settled, `settle events of ${name}`).toHaveLength(1);
  return settled[0]!;
}

const limits: ReadonlyArray<[string, <T>(op: Op<T>) => Operation<T>]> = [
  ["timeout(100, op)", (op) => timeout(100, op)],
  ["timeoutAt(100, op)", (op) => timeoutAt(100, op)],
];

describe("A. timeouts and ownership", () => {
  for (const [form, limit] of limits) {
    it(`1: an expiry of ${form} runs the body's finally at 100 and throws TimeoutError from the call`, async () => {
      const h = createHarness();
      let caught: unknown;
      let pendingInFinally: readonly number[] = [];
      const task = h.run(function* root() {
        try {
          yield* limit(function* body() {
            try {
              yield* sleep(1000);
            } finally {
              h.mark("body");
              pendingInFinally = h.clock.pendingTimerInstants;
            }
          });
        } catch (e) {
          caught = e;
          h.mark("threw");
          throw e;
        }
      });

      const error = await rejectionOf(task);

      expectLog(h.log, ["body@100", "threw@100"]);
      expect(caught).toBeInstanceOf(TimeoutError);
      expect(caught).toMatchObject({
        name: "TimeoutError",
        code: "KEEL_TIMEOUT",
        timeoutMs: 100,
        deadline: 100,
        elapsedMs: 100,
      });
      expect(error).toBe(caught);
      expect(task.state).toBe("failed");
      const settle = settleOf(h, "root");
      expect(settle).toMatchObject({ at: 100, state: "failed" });
      expect(settle.error).toBe(caught);
      expect(pendingInFinally).not.toContain(1000);
      expect(h.clock.pendingTimers).toBe(0);
      await h.expectClean();
    });
  }

  it("2: finishing early disarms the timer, and nothing happens at the old deadline", async () => {
    const h = createHarness();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      let pendingAfter = -1;
      let countAfter = -1;
      const task: Task<string> = h.run(function* root() {
        const v = yield* timeout(1000, function* op() {
          try {
            yield* sleep(10);
          } catch (e) {
            h.mark(`op saw ${String(e)}`);
            throw e;
          }
          return "ok";
        });
        h.mark(v);
        pendingAfter = h.clock.pendingTimers;
        countAfter = task.cancellationCount;
        return v;
      });

      expect(await task).toBe("ok");
      h.clock.advance(2000);
      await new Promise<void>((resolve) => setImmediate(resolve));

      expectLog(h.log, ["ok@10"]);
      expect(pendingAfter).toBe(0);
      expect(countAfter).toBe(0);
      expect(task.cancellationCount).toBe(0);
      expect(task.state).toBe("completed");
      expect(h.eventsOf("timeout:fire")).toEqual([]);
      expect(h.eventsOf("cancel:request")).toEqual([]);
      expect(h.events.filter((e) => e.at > 10)).toEqual([]);
      expect(unhandled).toEqual([]);
      await h.expectClean();
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  it("3: a body that swallows Cancelled and returns still gets TimeoutError at 100, and the swallow is reported", async () => {
    const h = createHarness();
    let seen: unknown;
    let caught: unknown;
    let countAfter = -1;
    let result: unknown = "not returned";
    const task = h.run(function* root() {
      try {
        result = yield* timeout(100, function* body() {
          try {
            yield* sleep(1000);
          } catch (e) {
            seen = e;
            h.mark(`catch:${isCancelled(e)}`);
            return "swallowed";
          } finally {
            h.mark("fin");
          }
          return "slept";
        });
      } catch (e) {
        caught = e;
        h.mark("threw");
        countAfter = task.cancellationCount;
      }
    });
    await task;

    expectLog(h.log, ["catch:true@100", "fin@100", "threw@100"]);
    expect(seen).not.toBeInstanceOf(Error);
    expect(seen).toBeInstanceOf(Cancelled);
    expect((seen as Cancelled).reason.kind).toBe("timeout");
    expect(result).toBe("not returned");
    expect(caught).toBeInstanceOf(TimeoutError);
    expect(caught).toMatchObject({ timeoutMs: 100, deadline: 100, elapsedMs: 100 });
    const swallows = h.eventsOf("cleanup:swallow");
    expect(swallows).toHaveLength(1);
    expect(swallows[0]!.at).toBe(100);
    expect(countAfter).toBe(0);
    expect(task.state).toBe("completed");
    await h.expectClean();
  });

  it("3 (variant): a swallowing catch may still sleep within the budget; TimeoutError comes at 110 with elapsedMs 110", async () => {
    const h = createHarness();
    let caught: unknown;
    let countAfter = -1;
    let result: unknown = "not returned";
    const task = h.run(function* root() {
      try {
        result = yield* timeout(100, function* body() {
          try {
            yield* sleep(1000);
          } catch (e) {
            h.mark(`catch:${isCancelled(e)}`);
            yield* sleep(10);
            h.mark("slept");
            return "late";
          } finally {
            h.mark("fin");
          }
          return "slept through";
        });
      } catch (e) {
        caught = e;
        h.mark("threw");
        countAfter = task.cancellationCount;
      }
    });
    await task;

    expectLog(h.log, ["catch:true@100", "slept@110", "fin@110", "threw@110"]);
    expect(result).toBe("not returned");
    expect(caught).toBeInstanceOf(TimeoutError);
    expect(caught).toMatchObject({ timeoutMs: 100, deadline: 100, elapsedMs: 110 });
    const swallows = h.eventsOf("cleanup:swallow");
    expect(swallows).toHaveLength(1);
    expect(swallows[0]!.at).toBe(110);
    expect(countAfter).toBe(0);
    expect(task.state).toBe("completed");
    await h.expectClean();
  });

  it("4: inside the scope only Cancelled is visible, outside only TimeoutError", async () => {
    const h = createHarness();
    const task = h.run(function* root() {
      try {
        yield* timeout(100, function* body() {
          try {
            yield* sleep(1000);
          } catch (e) {
            h.mark(`in:${isCancelled(e) ? "Cancelled" : (e as Error).name}`);
            throw e;
          }
        });
      } catch (e) {
        h.mark(`out:${isCancelled(e) ? "Cancelled" : (e as Error).name}`);
      }
    });
    await task;

    expectLog(h.log, ["in:Cancelled@100", "out:TimeoutError@100"]);
    expect(task.state).toBe("completed");
    await h.expectClean();
  });

  it("5: a foreign error passes through unchanged and disarms the timer", async () => {
    const h = createHarness();
    const keyErr = new Error("KeyError: 'id'");
    const ownKeysBefore = Reflect.ownKeys(keyErr);
    let caught: unknown;
    let pendingAtCatch = -1;
    const task = h.run(function* root() {
      try {
        yield* timeout(100, function* body() {
          yield* sleep(5);
          throw keyErr;
        });
      } catch (e) {
        caught = e;
        h.mark("threw");
        pendingAtCatch = h.clock.pendingTimers;
      }
    });
    await task;
    h.clock.advance(200);
    await new Promise<void>((resolve) => setImmediate(resolve));

    expectLog(h.log, ["threw@5"]);
    expect(caught).toBe(keyErr);
    expect(Reflect.ownKeys(keyErr)).toEqual(ownKeysBefore);
    expect(Object.hasOwn(keyErr, "suppressed")).toBe(false);
    expect(pendingAtCatch).toBe(0);
    expect(h.events.filter((e) => e.at > 5)).toEqual([]);
    expect(h.eventsOf("timeout:fire")).toEqual([]);
    await h.expectClean();
  });

  it("6a: a TimeoutError thrown by the operation itself passes through untouched", async () => {
    const h = createHarness();
    const clientError = new TimeoutError({
      timeoutMs: 30,
      deadline: 35,
      elapsedMs: 30,
      label: "client GET /orders",
    });
    const fieldsBefore = { ...clientError, message: clientError.message, name: clientError.name };
    const ownKeysBefore = Reflect.ownKeys(clientError);
    let caught: unknown;
    let pendingAtCatch = -1;
    let countAtCatch = -1;
    const task = h.run(function* root() {
      try {
        yield* timeout(100, function* clientCall() {
          yield* sleep(5);
          throw clientError;
        });
      } catch (e) {
        caught = e;
        h.mark("threw");
        pendingAtCatch = h.clock.pendingTimers;
        countAtCatch = task.cancellationCount;
      }
    });
    await task;

    expectLog(h.log, ["threw@5"]);
    expect(caught).toBe(clientError);
    expect({ ...clientError, message: clientError.message, name: clientError.name }).toEqual(fieldsBefore);
    expect(Reflect.ownKeys(clientError)).toEqual(ownKeysBefore);
    expect(clientError.timeoutMs).toBe(30);
    expect(pendingAtCatch).toBe(0);
    expect(countAtCatch).toBe(0);
    expect(h.eventsOf("timeout:fire")).toEqual([]);
    await h.expectClean();
  });

  it("6b: an inner timeout's TimeoutError passes an outer timeout untouched", async () => {
    const h = createHarness();
    let caught: unknown;
    let pendingAtCatch = -1;
    let countAtCatch = -1;
    const task = h.run(function* root() {
      try {
        yield* timeout(100, timeout(50, suspend()));
      } catch (e) {
        caught = e;
        h.mark("threw");
        pendingAtCatch = h.clock.pendingTimers;
        countAtCatch = task.cancellationCount;
      }
    });
    await task;

    expectLog(h.log, ["threw@50"]);
    expect(caught).toBeInstanceOf(TimeoutError);
    expect(caught).toMatchObject({ timeoutMs: 50, deadline: 50, elapsedMs: 50, label: "timeout(50)" });
    expect(Object.hasOwn(caught as object, "suppressed")).toBe(false);
    expect(pendingAtCatch).toBe(0);
    expect(countAtCatch).toBe(0);
    expect(scopeLabels(h, "timeout:fire")).toEqual(["timeout(50)"]);
    await h.expectClean();
  });

  const spent: ReadonlyArray<[string, (op: Op<void>) => Operation<void>]> = [
    ["timeout(0, op)", (op) => timeout(0, op)],
    [
      "timeoutAt(now, op)",
      (op) => ({
        *[Symbol.iterator]() {
          return yield* timeoutAt(yield* readNow(), op);
        },
      }),
    ],
  ];
  for (const [form, limit] of spent) {
    it(`7: ${form} throws TimeoutError at once and starts nothing: no task, no timer`, async () => {
      const h = createHarness();
      const schedule = vi.spyOn(h.clock, "schedule");
      let caught: unknown;
      const task = h.run(function* root() {
        try {
          yield* limit(function* op() {
            h.mark("started");
            yield* sleep(10);
          });
        } catch (e) {
          caught = e;
          h.mark("threw");
        }
      });
      await task;

      expectLog(h.log, ["threw@0"]);
      expect(caught).toBeInstanceOf(TimeoutError);
      expect(caught).toMatchObject({ code: "KEEL_TIMEOUT", elapsedMs: 0, deadline: 0 });
      expect(schedule).not.toHaveBeenCalled();
      expect(h.eventsOf("task:start").map((e) => e.name)).toEqual(["root"]);
      await h.expectClean();
    });
  }

  it("8 (a, b, c, f): bad durations and instants are a RangeError naming the parameter, thrown by the call itself", () => {
    const h = createHarness();
    const op = function* op() {
      h.mark("started");
    };

    expect(() => timeout(-1, op)).toThrow(RangeError);
    expect(() => timeout(-1, op)).toThrow(/\bms\b/);
    expect(() => timeout(Number.NaN, op)).toThrow(RangeError);
    expect(() => timeout(Number.NaN, op)).toThrow(/\bms\b/);
    expect(() => timeoutAt(Number.NaN, op)).toThrow(RangeError);
    expect(() => timeoutAt(Number.NaN, op)).toThrow(/\bat\b/);
    expect(() => sleep(-1)).toThrow(RangeError);
    expect(() => sleep(-1)).toThrow(/\bms\b/);
    expect(() => withCleanupBudget(Number.NaN, op)).toThrow(RangeError);
    expect(() => withCleanupBudget(Number.NaN, op)).toThrow(/\bms\b/);
    expect(() => shield(op, { limitMs: -5 })).toThrow(RangeError);
    expect(() => shield(op, { limitMs: -5 })).toThrow(/limitMs/);

    expect(h.log).toEqual([]);
    expect(h.events).toEqual([]);
  });

  it("8 (e): a non-operation is a TypeError naming op, thrown by the call itself", () => {
    const h = createHarness();

    expect(() => timeout(100, 42 as any)).toThrow(TypeError);
    expect(() => timeout(100, 42 as any)).toThrow(/\bop\b/);

    expect(h.events).toEqual([]);
  });

  it("8 (d): a deadline already in the past is valid and throws TimeoutError without starting op", async () => {
    const h = createHarness();
    let caught: unknown;
    let built = false;
    const task = h.run(function* root() {
      yield* sleep(20);
      const limited = timeoutAt(9, function* op() {
        h.mark("started");
        yield* sleep(10);
      });
      built = true;
      try {
        yield* limited;
      } catch (e) {
        caught = e;
        h.mark("threw");
      }
    });
    await task;

    expect(built).toBe(true);
    expectLog(h.log, ["threw@20"]);
    expect(caught).toBeInstanceOf(TimeoutError);
    expect(caught).toMatchObject({ code: "KEEL_TIMEOUT", deadline: 9 });
    expect(h.eventsOf("task:start").map((e) => e.name)).toEqual(["root"]);
    await h.expectClean();
  });

  const disabled: ReadonlyArray<[string, (op: Op<string>) => Operation<string>]> = [
    ["timeout(Infinity, op)", (op) => timeout(Number.POSITIVE_INFINITY, op)],
    ["timeoutAt(Infinity, op)", (op) => timeoutAt(Number.POSITIVE_INFINITY, op)],
  ];
  for (const [form, limit] of disabled) {
    for (const nested of [false, true]) {
      const where = nested ? " inside timeout(500)" : "";
      it(`9: ${form}${where} registers no timer and leaves the deadline ${nested ? "at 500" : "at Infinity"}`, async () => {
        const h = createHarness();
        const schedule = vi.spyOn(h.clock, "schedule");
        const op = function* op() {
          const d = yield* readDeadline();
          const r = yield* readRemaining();
          h.mark(`reads ${d}/${r}`);
          yield* sleep(10);
          return "v";
        };
        const task = h.run(function* root() {
          const v = nested ? yield* timeout(500, () => limit(op)) : yield* limit(op);
          h.mark(v);
          return v;
        });

        expect(await task).toBe("v");
        expectLog(h.log, [nested ? "reads 500/500@0" : "reads Infinity/Infinity@0", "v@10"]);
        expect(schedule.mock.calls.map((c) => c[0])).toEqual(nested ? [500, 10] : [10]);
        await h.expectClean();
      });
    }
  }

  it("10: a timeout around a scope with children cancels the whole region at once and throws one TimeoutError", async () => {
    const h = createHarness();
    let caught: unknown;
    let c1: Task<void> | undefined;
    let c2: Task<void> | undefined;
    const child = (name: string) =>
      function* () {
        try {
          yield* sleep(2000);
        } finally {
          h.mark(name);
        }
      };
    const task = h.run(function* root() {
      try {
        yield* timeout(
          100,
          scoped(function* region() {
            c1 = yield* spawn(child("c1"), { name: "c1" });
            c2 = yield* spawn(child("c2"), { name: "c2" });
            try {
              yield* sleep(2000);
            } finally {
              h.mark("body");
            }
          }),
        );
      } catch (e) {
        caught = e;
        h.mark("threw");
      }
    });
    await task;

    expectLog(h.log, [["body@100", "c1@100", "c2@100"], "threw@100"]);
    expect(caught).toBeInstanceOf(TimeoutError);
    expect(caught).toMatchObject({ timeoutMs: 100, elapsedMs: 100 });
    expect((caught as { suppressed?: unknown[] }).suppressed ?? []).toEqual([]);
    expect(h.eventsOf("error:suppressed")).toEqual([]);
    expect(scopeLabels(h, "timeout:fire")).toEqual(["timeout(100)"]);
    expect(c1?.state).toBe("cancelled");
    expect(c2?.state).toBe("cancelled");
    expect(task.state).toBe("completed");
    await h.expectClean();
  });

  it("10 (variant): a timeout around all([c1, c2]) cancels both at once and throws one TimeoutError", async () => {
    const h = createHarness();
    let caught: unknown;
    const task = h.run(function* root() {
      try {
        yield* timeout(
          100,
          all([
            function* c1() {
              try {
                yield* sleep(2000);
              } finally {
                h.mark("c1");
              }
            },
            function* c2() {
              try {
                yield* sleep(2000);
              } finally {
                h.mark("c2");
              }
            },
          ]),
        );
      } catch (e) {
        caught = e;
        h.mark("threw");
      }
    });
    await task;

    expectLog(h.log, [["c1@100", "c2@100"], "threw@100"]);
    expect(caught).toBeInstanceOf(TimeoutError);
    expect(caught).toMatchObject({ timeoutMs: 100, elapsedMs: 100 });
    expect((caught as { suppressed?: unknown[] }).suppressed ?? []).toEqual([]);
    expect(h.eventsOf("error:suppressed")).toEqual([]);
    expect(scopeLabels(h, "timeout:fire")).toEqual(["timeout(100)"]);
    expect(settleOf(h, "c1")).toMatchObject({ at: 100, state: "cancelled" });
    expect(settleOf(h, "c2")).toMatchObject({ at: 100, state: "cancelled" });
    expect(task.state).toBe("completed");
    await h.expectClean();
  });

  it("11: work spawned inside a timeout body is cancelled (reason parent) before the timeout returns", async () => {
    const h = createHarness();
    let pendingAfter = -1;
    let childTask: Task<void> | undefined;
    const task = h.run(function* root() {
      const v = yield* timeout(100, function* body() {
        childTask = yield* spawn(function* child() {
          try {
            yield* sleep(2000);
          } finally {
            h.mark("child");
          }
        });
        yield* sleep(10);
        return "x";
      });
      h.mark(v);
      pendingAfter = h.clock.pendingTimers;
      return v;
    });

    expect(await task).toBe("x");
    h.clock.advance(200);
    await new Promise<void>((resolve) => setImmediate(resolve));

    expectLog(h.log, ["child@10", "x@10"]);
    expect(childTask?.state).toBe("cancelled");
    const settle = settleOf(h, "child");
    expect(settle).toMatchObject({ at: 10, state: "cancelled" });
    expect(settle.reason?.kind).toBe("parent");
    const requests = h.eventsOf("cancel:request").filter((e) => e.taskId === childTask?.id);
    expect(requests.map((e) => [e.reason.kind, e.at])).toEqual([["parent", 10]]);
    expect(pendingAfter).toBe(0);
    expect(h.eventsOf("timeout:fire")).toEqual([]);
    expect(h.events.filter((e) => e.at > 10)).toEqual([]);
    await h.expectClean();
  });

  it("11 (variant): the timeout waits for its child's async cleanup and returns at 30", async () => {
    const h = createHarness();
    let pendingAfter = -1;
    let childTask: Task<void> | undefined;
    const task = h.run(function* root() {
      const v = yield* timeout(100, function* body() {
        childTask = yield* spawn(function* child() {
          try {
            yield* sleep(2000);
          } finally {
            yield* sleep(20);
            h.mark("child");
          }
        });
        yield* sleep(10);
        return "x";
      });
      h.mark(v);
      pendingAfter = h.clock.pendingTimers;
      return v;
    });

    expect(await task).toBe("x");
    h.clock.advance(200);
    await new Promise<void>((resolve) => setImmediate(resolve));

    expectLog(h.log, ["child@30", "x@30"]);
    expect(childTask?.state).toBe("cancelled");
    const settle = settleOf(h, "child");
    expect(settle).toMatchObject({ at: 30, state: "cancelled" });
    expect(settle.reason?.kind).toBe("parent");
    expect(pendingAfter).toBe(0);
    expect(h.eventsOf("timeout:fire")).toEqual([]);
    expect(h.events.filter((e) => e.at > 30)).toEqual([]);
    await h.expectClean();
  });

  it("12: a TimeoutError inside a child is an ordinary failure that fails the owning scope", async () => {
    const h = createHarness();
    let caught: unknown;
    let a: Task<never> | undefined;
    let b: Task<void> | undefined;
    const task = h.run(function* root() {
      try {
        yield* scoped(function* region() {
          a = yield* spawn(timeout(100, suspend()), { name: "A" });
          b = yield* spawn(function* B() {
            try {
              yield* sleep(500);
            } finally {
              h.mark("B.fin");
            }
          });
          yield* suspend();
        });
      } catch (e) {
        caught = e;
        h.mark("scoped threw");
      }
    });
    await task;

    expectLog(h.log, ["B.fin@100", "scoped threw@100"]);
    expect(caught).toBeInstanceOf(TimeoutError);
    expect(caught).toMatchObject({ timeoutMs: 100, deadline: 100, elapsedMs: 100 });
    expect(a?.state).toBe("failed");
    const aSettle = settleOf(h, "A");
    expect(aSettle).toMatchObject({ at: 100, state: "failed" });
    expect(aSettle.error).toBe(caught);
    expect(await rejectionOf(a!)).toBe(caught);
    expect(b?.state).toBe("cancelled");
    expect(settleOf(h, "B").reason?.kind).toBe("child-failed");
    const scopeRequests = h.eventsOf("cancel:request").filter((e) => e.taskId === task.id);
    expect(
      scopeRequests.map((e) => [e.reason.kind, e.at, e.owner === "outside" ? "outside" : "scope"]),
    ).toEqual([["child-failed", 100, "scope"]]);
    expect(task.state).toBe("completed");
    await h.expectClean();
  });
});

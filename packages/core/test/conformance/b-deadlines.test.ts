/**
 * Conformance section B, "Deadlines and nested budgets" (cases 13–19 of design/conformance.md).
 */
import {
  call,
  isCancelled,
  deadline as readDeadline,
  remaining as readRemaining,
  shield,
  sleep,
  spawn,
  suspend,
  type Task,
  TimeoutError,
  timeout,
  timeoutAt,
} from "@keel/core";
import { createHarness, type Harness } from "@keel/testing";
import { describe, expect, it, vi } from "vitest";
import { scopeLabels } from "../support/events.js";
import { expectLog } from "../support/log.js";

/** Events that name the scope labelled `label`, in any role. */
function eventsNamingScope(h: Harness, label: string) {
  return h.events.filter(
    (e) =>
      ((e.type === "timeout:fire" || e.type === "timeout:superseded" || e.type === "cleanup:swallow") &&
        e.scope?.label === label) ||
      (e.type === "cancel:request" && e.owner !== "outside" && e.owner.label === label),
  );
}

describe("B. deadlines and nested budgets", () => {
  it("13: an inner, shorter timeout fires and is caught; the outer stays armed and the task is not cancelling", async () => {
    const h = createHarness();
    let countAtCatch = -1;
    let stateAtCatch = "";
    let pendingAtCatch: readonly number[] = [];
    let pendingAfter = -1;
    const task: Task<string> = h.run(function* root() {
      const v = yield* timeout(1000, function* body() {
        try {
          yield* timeout(100, sleep(5000));
        } catch (e) {
          h.mark(`inner:${(e as Error).name}`);
          countAtCatch = task.cancellationCount;
          stateAtCatch = task.state;
          pendingAtCatch = h.clock.pendingTimerInstants;
        }
        yield* sleep(200);
        return "ok";
      });
      h.mark(v);
      pendingAfter = h.clock.pendingTimers;
      return v;
    });

    expect(await task).toBe("ok");

    expectLog(h.log, ["inner:TimeoutError@100", "ok@300"]);
    expect(countAtCatch).toBe(0);
    expect(stateAtCatch).toBe("running");
    expect(pendingAtCatch).toEqual([1000]);
    expect(pendingAfter).toBe(0);
    expect(scopeLabels(h, "timeout:fire")).toEqual(["timeout(100)"]);
    expect(task.cancellationCount).toBe(0);
    expect(task.state).toBe("completed");
    await h.expectClean();
  });

  it("14: a shorter outer timeout wins; the inner makes no request and stays silent", async () => {
    const h = createHarness();
    let caught: unknown;
    let pendingAtCatch = -1;
    const task = h.run(function* root() {
      try {
        yield* timeout(
          100,
          timeout(1000, function* body() {
            try {
              yield* sleep(5000);
            } catch (e) {
              h.mark(`saw:${isCancelled(e) ? e.reason.kind : String(e)}`);
              throw e;
            } finally {
              h.mark("fin");
            }
          }),
        );
      } catch (e) {
        caught = e;
        h.mark("threw");
        pendingAtCatch = h.clock.pendingTimers;
      }
    });
    await task;

    expectLog(h.log, ["saw:timeout@100", "fin@100", "threw@100"]);
    expect(caught).toBeInstanceOf(TimeoutError);
    expect(caught).toMatchObject({ timeoutMs: 100, deadline: 100, elapsedMs: 100, label: "timeout(100)" });
    expect(Object.hasOwn(caught as object, "suppressed")).toBe(false);
    expect(
      h.eventsOf("cancel:request").map((e) => (e.owner === "outside" ? "outside" : e.owner.label)),
    ).toEqual(["timeout(100)"]);
    expect(scopeLabels(h, "timeout:fire")).toEqual(["timeout(100)"]);
    expect(eventsNamingScope(h, "timeout(1000)")).toEqual([]);
    expect(h.eventsOf("error:suppressed")).toEqual([]);
    expect(pendingAtCatch).toBe(0);
    expect(task.state).toBe("completed");
    await h.expectClean();
  });

  it("15: equal deadlines: both timers fire, the outer's first, and only the outer throws", async () => {
    const h = createHarness();
    let caught: unknown;
    let countInFinally = -1;
    const task = h.run(function* root() {
      try {
        yield* timeoutAt(100, function* outerBody() {
          try {
            return yield* timeoutAt(100, function* hangWithFin() {
              try {
                yield* suspend();
              } finally {
                h.mark("fin");
                countInFinally = task.cancellationCount;
              }
            });
          } catch (e) {
            h.mark(`between:${isCancelled(e) ? "Cancelled" : (e as Error).name}`);
            throw e;
          }
        });
      } catch (e) {
        caught = e;
        h.mark(`threw:${isCancelled(e) ? "Cancelled" : (e as Error).name}`);
      }
    });
    await task;

    expectLog(h.log, ["fin@100", "between:Cancelled@100", "threw:TimeoutError@100"]);
    expect(countInFinally).toBe(2);
    expect(caught).toBeInstanceOf(TimeoutError);
    expect(caught).toMatchObject({ timeoutMs: 100, deadline: 100, elapsedMs: 100, label: "timeoutAt(100)" });
    const requests = h.eventsOf("cancel:request");
    expect(requests.map((e) => [e.at, e.reason.kind])).toEqual([
      [100, "timeout"],
      [100, "timeout"],
    ]);
    const [outerRequest, innerRequest] = requests.map((e) => (e.owner === "outside" ? null : e.owner));
    // Frames are numbered on entry, so the outer scope has the lower id.
    expect(outerRequest!.id).toBeLessThan(innerRequest!.id);
    const superseded = h.eventsOf("timeout:superseded");
    expect(superseded.map((e) => [e.at, e.scope.id])).toEqual([[100, innerRequest!.id]]);
    expect(task.state).toBe("completed");
    await h.expectClean();
  });

  for (const [variant, innerMs, expected] of [
    ["16", 10000, [5000, 3800]],
    ["16 (a)", 3000, [3000, 1800]],
  ] as const) {
    it(`${variant}: inside timeout(5000, timeout(${innerMs}, …)) the effective deadline is the earlier one`, async () => {
      const h = createHarness();
      const task = h.run(function* root() {
        const outside = [yield* readDeadline(), yield* readRemaining()];
        const inside = yield* timeout(
          5000,
          timeout(innerMs, function* read() {
            yield* sleep(1200);
            return [yield* readDeadline(), yield* readRemaining()];
          }),
        );
        return { outside, inside };
      });

      expect(await task).toEqual({
        outside: [Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY],
        inside: [...expected],
      });
      expect(h.clock.now()).toBe(1200);
      await h.expectClean();
    });
  }

  for (const [form, limitMs, expected] of [
    ["shield(read, { limitMs: 1000 })", 1000, [2200, 1000]],
    ["shield(read) with the default limit (the cleanup budget)", undefined, [6200, 5000]],
  ] as const) {
    it(`16 (${limitMs === undefined ? "c" : "b"}): inside ${form} the enclosing deadline does not apply`, async () => {
      const h = createHarness();
      const read = function* read() {
        return [yield* readDeadline(), yield* readRemaining()];
      };
      const task = h.run(function* root() {
        return yield* timeout(
          5000,
          timeout(10000, function* body() {
            yield* sleep(1200);
            return yield* shield(read, limitMs === undefined ? undefined : { limitMs });
          }),
        );
      });

      expect(await task).toEqual([...expected]);
      expect(h.clock.now()).toBe(1200);
      await h.expectClean();
    });
  }

  it("17: the deadline travels across three hops and cancels all of them at once", async () => {
    const h = createHarness();
    let caught: unknown;
    let hop2: Task<void> | undefined;
    let hop3: Task<void> | undefined;
    const task = h.run(function* root() {
      try {
        yield* timeoutAt(5000, function* handler() {
          try {
            yield* sleep(3000);
            hop2 = yield* spawn(function* hop2Body() {
              try {
                h.mark(`hop2 reads ${yield* readRemaining()}`);
                yield* sleep(1000);
                hop3 = yield* spawn(function* hop3Body() {
                  try {
                    h.mark(`hop3 reads ${yield* readRemaining()}`);
                    yield* suspend();
                  } finally {
                    h.mark("hop3");
                  }
                });
                yield* hop3;
              } finally {
                h.mark("hop2");
              }
            });
            yield* hop2;
          } finally {
            h.mark("handler");
          }
        });
      } catch (e) {
        caught = e;
        h.mark("threw");
      }
    });
    await task;

    expectLog(h.log, [
      "hop2 reads 2000@3000",
      "hop3 reads 1000@4000",
      ["handler@5000", "hop2@5000", "hop3@5000"],
      "threw@5000",
    ]);
    expect(caught).toBeInstanceOf(TimeoutError);
    expect(caught).toMatchObject({ deadline: 5000, elapsedMs: 5000, label: "timeoutAt(5000)" });
    expect(hop2?.state).toBe("cancelled");
    expect(hop3?.state).toBe("cancelled");
    expect(task.state).toBe("completed");
    await h.expectClean();
  });

  it("18: a call entered after the budget is spent never invokes its transport", async () => {
    const h = createHarness();
    let caught: unknown;
    let countAfterAdvance = -1;
    let firesAfterAdvance: Array<[number, string]> = [];
    const transport = vi.fn((_signal: AbortSignal) => "response");
    const task = h.run(function* root() {
      try {
        yield* timeoutAt(5000, function* body() {
          h.clock.advance(5001);
          h.mark("advanced");
          countAfterAdvance = task.cancellationCount;
          firesAfterAdvance = h.eventsOf("timeout:fire").map((e) => [e.at, e.scope.label]);
          yield* call(transport);
          h.mark("after call");
        });
      } catch (e) {
        caught = e;
        h.mark("threw");
      }
    });
    await task;

    expectLog(h.log, ["advanced@5001", "threw@5001"]);
    expect(firesAfterAdvance).toEqual([[5000, "timeoutAt(5000)"]]);
    expect(countAfterAdvance).toBe(1);
    expect(transport).not.toHaveBeenCalled();
    expect(caught).toBeInstanceOf(TimeoutError);
    expect(caught).toMatchObject({ deadline: 5000, elapsedMs: 5001, label: "timeoutAt(5000)" });
    expect(task.state).toBe("completed");
    await h.expectClean();
  });

  it("18 (variant): a timeout entered after the budget is spent starts nothing and stays silent", async () => {
    const h = createHarness();
    const schedule = vi.spyOn(h.clock, "schedule");
    let caught: unknown;
    const task = h.run(function* root() {
      try {
        yield* timeoutAt(5000, function* body() {
          h.clock.advance(5001);
          h.mark("advanced");
          yield* timeout(1000, function* hop() {
            h.mark("hop started");
            yield* sleep(10);
          });
          h.mark("after hop");
        });
      } catch (e) {
        caught = e;
        h.mark("threw");
      }
    });
    await task;

    expectLog(h.log, ["advanced@5001", "threw@5001"]);
    expect(caught).toBeInstanceOf(TimeoutError);
    expect(caught).toMatchObject({ deadline: 5000, elapsedMs: 5001, label: "timeoutAt(5000)" });
    expect(schedule.mock.calls.map((c) => c[0])).not.toContain(6001);
    expect(eventsNamingScope(h, "timeout(1000)")).toEqual([]);
    expect(scopeLabels(h, "timeout:fire")).toEqual(["timeoutAt(5000)"]);
    expect(task.state).toBe("completed");
    await h.expectClean();
  });

  it("19: per-read idle timeouts do not bound the operation; the outer deadline cuts the read in flight", async () => {
    const h = createHarness();
    let caught: unknown;
    let bytes = 0;
    let pendingAtCatch = -1;
    const readByte = function* readByte() {
      let done = false;
      try {
        yield* sleep(900);
        done = true;
        return 0x61;
      } finally {
        if (!done) h.mark("read cancelled");
      }
    };
    const task = h.run(function* root() {
      try {
        yield* timeout(5000, function* readAll() {
          for (;;) {
            yield* timeout(1000, readByte);
            bytes++;
            h.mark("byte");
          }
        });
      } catch (e) {
        caught = e;
        h.mark("threw");
        pendingAtCatch = h.clock.pendingTimers;
      }
    });
    await task;

    expectLog(h.log, [
      "byte@900",
      "byte@1800",
      "byte@2700",
      "byte@3600",
      "byte@4500",
      "read cancelled@5000",
      "threw@5000",
    ]);
    expect(bytes).toBe(5);
    expect(caught).toBeInstanceOf(TimeoutError);
    expect(caught).toMatchObject({
      timeoutMs: 5000,
      deadline: 5000,
      elapsedMs: 5000,
      label: "timeout(5000)",
    });
    expect(scopeLabels(h, "timeout:fire")).toEqual(["timeout(5000)"]);
    expect(eventsNamingScope(h, "timeout(1000)")).toEqual([]);
    expect(pendingAtCatch).toBe(0);
    expect(task.state).toBe("completed");
    await h.expectClean();
  });
});

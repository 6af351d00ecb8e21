/**
 * Conformance, section D: bounded cleanup (cases 30–35 of design/conformance.md). Every case runs
 * on the harness's virtual clock with autojump; the cleanup budget is the default 5000 ms.
 */
import {
  type Cancelled,
  call,
  deadline,
  isCancelled,
  type Operation,
  remaining,
  shield,
  sleep,
  spawn,
  suspend,
  type Task,
  TaskCancelledError,
  TimeoutError,
  timeout,
} from "@keel/core";
import { createHarness } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { rejection } from "../support/errors.js";
import { settleOfTask } from "../support/events.js";
import { atTime, cancelAt } from "../support/timing.js";

describe("D. bounded cleanup", () => {
  it("30: a timeout opened inside finally still converts while the task is being cancelled", async () => {
    const h = createHarness();
    const counts: string[] = [];
    let caught: unknown;
    const task: Task<void> = h.run(function* T() {
      try {
        yield* suspend();
      } finally {
        try {
          yield* timeout(50, suspend());
        } catch (e) {
          caught = e;
          counts.push(`${task.cancellationCount}@catch`);
          h.mark(`cleanup:${(e as Error).name}`);
        }
      }
    });
    const settled = cancelAt(h, task, 10);
    atTime(h, 30, () => counts.push(`${task.cancellationCount}@30`));
    // Registered after the timeout's own timer (entered at 10), so it reads the count once it fired.
    atTime(h, 20, () => atTime(h, 60, () => counts.push(`${task.cancellationCount}@60`)));

    expect(await settled).toBe(60);
    expect(h.log).toEqual(["cleanup:TimeoutError@60"]);
    expect(caught).toBeInstanceOf(TimeoutError);
    expect((caught as TimeoutError).timeoutMs).toBe(50);
    expect(counts).toEqual(["1@30", "2@60", "1@catch"]);
    expect(task.state).toBe("cancelled");
    expect(settleOfTask(h, task).at).toBe(60);
    await h.expectClean();
  });

  it("31a: a pending error survives async cleanup in finally and passes the timeout unchanged", async () => {
    const h = createHarness();
    const valueErr = new Error("value");
    function* inner(): Operation<void> {
      try {
        throw valueErr;
      } finally {
        yield* sleep(10);
      }
    }
    let caught: unknown;
    let timersAtCatch = -1;
    const root = h.run(function* root() {
      try {
        yield* timeout(100, function* body() {
          yield* inner();
          h.mark("after");
        });
      } catch (e) {
        caught = e;
        timersAtCatch = h.clock.pendingTimers;
        h.mark("caught");
      }
    });
    await root;

    expect(h.log).toEqual(["caught@10"]);
    expect(caught).toBe(valueErr);
    expect(timersAtCatch).toBe(0);
    expect(h.eventsOf("timeout:fire")).toEqual([]);
    await h.expectClean();
  });

  it("31b: a deadline cuts a finally's async cleanup and its TimeoutError replaces the pending error", async () => {
    const h = createHarness();
    const valueErr = new Error("value");
    let caught: unknown;
    const root = h.run(function* root() {
      try {
        yield* timeout(10, function* body() {
          try {
            throw valueErr;
          } finally {
            yield* sleep(1000);
          }
        });
      } catch (e) {
        caught = e;
        h.mark(`caught:${(e as Error).name}`);
      }
    });
    await root;

    expect(h.log).toEqual(["caught:TimeoutError@10"]);
    expect(caught).toBeInstanceOf(TimeoutError);
    expect((caught as TimeoutError).timeoutMs).toBe(10);
    expect((caught as TimeoutError).elapsedMs).toBe(10);
    await h.expectClean();
  });

  it("32a: a cleanup step that never settles is cut at the budget, its AbortSignal fires, and the overrun names the task and the step", async () => {
    const h = createHarness();
    let request: Task<void> | undefined;
    const root = h.run(function* root() {
      request = yield* spawn(function* R() {
        try {
          yield* suspend();
        } finally {
          yield* call(function sendGoodbye(signal: AbortSignal) {
            signal.addEventListener("abort", () => h.mark("goodbye.aborted"));
            return new Promise<void>(() => {});
          });
        }
      });
      yield* suspend();
    });
    const states: string[] = [];
    const settled = cancelAt(h, root, 10);
    atTime(h, 2500, () => states.push(`${root.state}/${request!.state}@2500`));

    expect(await settled).toBe(5010);
    const R = request!;
    const requests = h.eventsOf("cancel:request").filter((e) => e.taskId === R.id);
    expect(requests.map((e) => e.at)).toEqual([10]);
    expect(states).toEqual(["cancelling/cancelling@2500"]);
    expect(h.log).toEqual(["goodbye.aborted@5010"]);
    expect(R.state).toBe("cancelled");
    expect(root.state).toBe("cancelled");
    expect(settleOfTask(h, R).at).toBe(5010);
    expect(settleOfTask(h, root).at).toBe(5010);
    const overruns = h.eventsOf("cleanup:overrun");
    expect(overruns).toHaveLength(1);
    expect(overruns[0]).toMatchObject({ path: R.path, waitingOn: "call(sendGoodbye)", at: 5010 });
    expect(h.eventsOf("cleanup:abandon")).toEqual([]);
    await h.expectClean();
  });

  it("32b: a cleanup that keeps swallowing is cut, then abandoned by 10010 at the latest and never resumed", async () => {
    const h = createHarness();
    let request: Task<void> | undefined;
    let iterations = 0;
    let resumedAfterSettle = 0;
    let firstCutAt: number | null = null;
    let loopHitAfterCut = 0;
    const root = h.run(function* root() {
      request = yield* spawn(function* R() {
        try {
          yield* suspend();
        } finally {
          while (true) {
            iterations++;
            if (request!.state === "cancelled") resumedAfterSettle++;
            try {
              yield* sleep(10);
            } catch (e) {
              if (isCancelled(e) && e.reason.kind === "cleanup-overrun") {
                firstCutAt ??= h.clock.now();
                loopHitAfterCut++;
              }
            }
          }
        }
      });
      yield* suspend();
    });

    const settledAt = await cancelAt(h, root, 10);
    const R = request!;
    const overruns = h.eventsOf("cleanup:overrun").filter((e) => e.taskId === R.id);
    expect(overruns).toHaveLength(1);
    expect(overruns[0]).toMatchObject({ path: R.path, waitingOn: "sleep(10)", at: 5010 });
    expect(firstCutAt).toBe(5010);
    // After the cut every suspension point throws at once: the loop spins without time moving.
    expect(loopHitAfterCut).toBeGreaterThan(1);
    const abandons = h.eventsOf("cleanup:abandon");
    expect(abandons).toHaveLength(1);
    const abandon = abandons[0]!;
    expect(abandon.path).toBe(R.path);
    expect(abandon.waitingOn).toBe("sleep(10)");
    expect(abandon.at).toBeGreaterThanOrEqual(5010);
    expect(abandon.at).toBeLessThanOrEqual(10010);
    expect(R.state).toBe("cancelled");
    expect(settleOfTask(h, R).at).toBe(abandon.at);
    expect(root.state).toBe("cancelled");
    expect(settleOfTask(h, root).at).toBe(abandon.at);
    expect(settledAt).toBe(abandon.at);
    expect(await rejection(R)).toBeInstanceOf(TaskCancelledError);

    // Never resumed again: time moving on and the runtime draining leave the generator untouched.
    const seen = iterations;
    await h.expectClean();
    h.clock.advance(20_000);
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(iterations).toBe(seen);
    expect(resumedAfterSettle).toBe(0);
    await h.expectClean();
  });

  it("33a: a shielded goodbye in finally completes, then the outer timeout throws", async () => {
    const h = createHarness();
    let caught: unknown;
    const root = h.run(function* root() {
      try {
        yield* timeout(1000, function* body() {
          try {
            yield* suspend();
          } finally {
            yield* shield(
              function* sendGoodbye() {
                yield* sleep(100);
                h.mark("goodbye");
              },
              { limitMs: 200 },
            );
          }
        });
      } catch (e) {
        caught = e;
        h.mark(`caught:${(e as Error).name}`);
      }
    });
    await root;

    expect(h.log).toEqual(["goodbye@1100", "caught:TimeoutError@1100"]);
    expect(caught).toBeInstanceOf(TimeoutError);
    expect((caught as TimeoutError).timeoutMs).toBe(1000);
    expect((caught as TimeoutError).elapsedMs).toBe(1100);
    await h.expectClean();
  });

  it("33b: a goodbye that never answers is cancelled at the shield's limit; the caller gets Cancelled and the outer TimeoutError at 1200", async () => {
    const h = createHarness();
    let caught: unknown;
    let atShield: unknown;
    const root = h.run(function* root() {
      try {
        yield* timeout(1000, function* body() {
          try {
            yield* suspend();
          } finally {
            try {
              yield* shield(
                () =>
                  call(function sendGoodbye(signal: AbortSignal) {
                    signal.addEventListener("abort", () => h.mark("goodbye.aborted"));
                    return new Promise<void>(() => {});
                  }),
                { limitMs: 200 },
              );
            } catch (e) {
              atShield = e;
              h.mark(`shield:${isCancelled(e) ? "Cancelled" : (e as Error).name}`);
              // biome-ignore lint/correctness/noUnsafeFinally: rethrowing what the shield threw is the case.
              throw e;
            }
          }
        });
      } catch (e) {
        caught = e;
        h.mark(`caught:${(e as Error).name}`);
      }
    });
    await root;

    expect(h.log).toEqual(["goodbye.aborted@1200", "shield:Cancelled@1200", "caught:TimeoutError@1200"]);
    expect(isCancelled(atShield)).toBe(true);
    expect((atShield as Cancelled).reason.kind).toBe("timeout");
    expect(caught).toBeInstanceOf(TimeoutError);
    expect((caught as TimeoutError).timeoutMs).toBe(1000);
    expect((caught as TimeoutError).elapsedMs).toBe(1200);
    expect(settleOfTask(h, root).at).toBe(1200);
    await h.expectClean();
  });

  it("34: resources held by enclosing frames outlive the body's finally and close last-opened first", async () => {
    const h = createHarness();
    function withConn<T>(name: string, body: () => Operation<T>): Operation<T> {
      return (function* () {
        try {
          return yield* body();
        } finally {
          yield* sleep(5);
          h.mark(`${name}.close`);
        }
      })();
    }
    const task = h.run(function* T() {
      yield* withConn("A", () =>
        withConn("B", function* body() {
          try {
            yield* suspend();
          } finally {
            yield* sleep(5);
            h.mark("bye-sent");
          }
        }),
      );
    });

    expect(await cancelAt(h, task, 10)).toBe(25);
    expect(h.log).toEqual(["bye-sent@15", "B.close@20", "A.close@25"]);
    expect(task.state).toBe("cancelled");
    expect(settleOfTask(h, task).at).toBe(25);
    await h.expectClean();
  });

  it("35: cleanup runs under the cleanup deadline, lowered by a timeout opened inside it", async () => {
    const h = createHarness();
    const reads: string[] = [];
    const task: Task<void> = h.run(function* T() {
      try {
        yield* suspend();
      } finally {
        yield* sleep(5);
        h.mark("slept");
        const v = yield* timeout(100, function* quick() {
          reads.push(`quick.deadline:${yield* deadline()}`);
          yield* sleep(10);
          return 10;
        });
        h.mark(`quick:${v}`);
        reads.push(`deadline:${yield* deadline()}`, `remaining:${yield* remaining()}`, `state:${task.state}`);
      }
    });

    expect(await cancelAt(h, task, 10)).toBe(25);
    expect(h.log).toEqual(["slept@15", "quick:10@25"]);
    expect(reads).toEqual(["quick.deadline:115", "deadline:5010", "remaining:4985", "state:cancelling"]);
    expect(task.state).toBe("cancelled");
    await h.expectClean();
  });
});

/**
 * Conformance, section C: cancellation delivery, propagation and outcomes (cases 20–29 of
 * design/conformance.md). Every case runs on the harness's virtual clock with autojump.
 */
import {
  all,
  type Cancelled,
  isCancelled,
  KeelError,
  type Operation,
  scoped,
  sleep,
  spawn,
  suspend,
  type Task,
  TaskCancelledError,
  TimeoutError,
  timeout,
  useScope,
  withCleanupBudget,
} from "@keel/core";
import { createHarness, type Harness } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { rejection } from "../support/errors.js";
import { settleOfTask } from "../support/events.js";
import { atTime, cancelAt } from "../support/timing.js";

/** Log entries grouped by instant, each group sorted: entries of different tasks at one instant are a set. */
function byInstant(log: readonly string[]): string[][] {
  const groups: string[][] = [];
  let last: string | null = null;
  for (const entry of log) {
    const at = entry.slice(entry.lastIndexOf("@"));
    if (at !== last) groups.push([]);
    groups[groups.length - 1]!.push(entry);
    last = at;
  }
  return groups.map((g) => [...g].sort());
}

describe("C. cancellation: delivery, propagation, outcomes", () => {
  it("20: cancelling a task cancels its whole subtree at once, and the children unwind concurrently", async () => {
    const h = createHarness();
    const children: Task<void>[] = [];
    const child = (name: string, d: number) =>
      function* (): Operation<void> {
        try {
          yield* suspend();
        } finally {
          h.mark(`${name}.start`);
          yield* sleep(d);
          h.mark(`${name}.done`);
        }
      };
    const P = h.run(function* P() {
      children.push(yield* spawn(child("C1", 5), { name: "C1" }));
      children.push(yield* spawn(child("C2", 10), { name: "C2" }));
      try {
        yield* suspend();
      } finally {
        h.mark("P");
      }
    });
    const states: string[] = [];
    atTime(h, 19, () => states.push(`${P.state}@19`));
    const settled = cancelAt(h, P, 20);
    atTime(h, 20, () => states.push(`${P.state}@20`));
    atTime(h, 25, () => states.push(`${P.state}@25`));
    atTime(h, 29, () => states.push(`${P.state}@29`));

    expect(await settled).toBe(30);
    expect(byInstant(h.log)).toEqual(
      byInstant(["P@20", "C1.start@20", "C2.start@20", "C1.done@25", "C2.done@30"]),
    );
    expect(states).toEqual(["running@19", "cancelling@20", "cancelling@25", "cancelling@29"]);
    expect(P.state).toBe("cancelled");
    expect(settleOfTask(h, P).at).toBe(30);
    const [C1, C2] = children;
    expect(C1!.state).toBe("cancelled");
    expect(C2!.state).toBe("cancelled");
    expect(settleOfTask(h, C1!).at).toBe(25);
    expect(settleOfTask(h, C2!).at).toBe(30);
    expect(await rejection(P)).toBeInstanceOf(TaskCancelledError);
    await h.expectClean();
  });

  it("21: a catch can see Cancelled; swallowing it drops the value, ends the task cancelled and is reported", async () => {
    const h = createHarness();
    let seen: unknown;
    const T = h.run(function* T() {
      try {
        yield* suspend();
      } catch (e) {
        seen = e;
        h.mark(`caught:${isCancelled(e)}`);
      }
      h.mark("after");
      yield* sleep(1);
      return 42;
    });
    let joined: unknown;
    const joiner = h.run(function* joiner() {
      try {
        yield* T;
      } catch (e) {
        joined = e;
        h.mark(`joiner:${isCancelled(e) ? "Cancelled" : (e as Error).name}`);
      }
    });
    const states: string[] = [];
    const settled = cancelAt(h, T, 10);
    atTime(h, 10.5, () => states.push(`${T.state}@10.5`));

    expect(await settled).toBe(11);
    await joiner;
    expect(h.log).toEqual(["caught:true@10", "after@10", "joiner:TaskCancelledError@11"]);
    expect(isCancelled(seen)).toBe(true);
    expect(seen instanceof Error).toBe(false);
    expect((seen as Cancelled).reason.kind).toBe("cancel");
    expect(states).toEqual(["cancelling@10.5"]);
    expect(T.state).toBe("cancelled");
    expect(settleOfTask(h, T).at).toBe(11);
    const err = await rejection(T);
    expect(err).toBeInstanceOf(TaskCancelledError);
    expect(joined).toBeInstanceOf(TaskCancelledError);
    expect(isCancelled(joined)).toBe(false);
    const swallows = h.eventsOf("cleanup:swallow");
    expect(swallows).toHaveLength(1);
    expect(swallows[0]!.path).toBe(T.path);
    expect(swallows[0]!.at).toBe(11);
    expect(joiner.state).toBe("completed");
    await h.expectClean();
  });

  it("22: a task that yields on its own cancel() ends cancelled at once, without deadlock", async () => {
    const h = createHarness();
    const task: Task<void> = h.run(function* T() {
      try {
        yield* sleep(3);
        yield* task.cancel();
        h.mark("unreachable");
      } finally {
        h.mark("fin");
      }
    });

    expect(await rejection(task)).toBeInstanceOf(TaskCancelledError);
    expect(h.log).toEqual(["fin@3"]);
    expect(task.state).toBe("cancelled");
    expect(settleOfTask(h, task).at).toBe(3);
    await h.expectClean();
  });

  it("22 (variant): a task that calls its own cancel() runs on to the next suspension point, which throws", async () => {
    const h = createHarness();
    let atSleep: unknown;
    const task: Task<void> = h.run(function* T() {
      try {
        yield* sleep(3);
        task.cancel();
        h.mark("sync");
        try {
          yield* sleep(1);
        } catch (e) {
          atSleep = e;
          throw e;
        }
        h.mark("unreachable");
      } finally {
        h.mark("fin");
      }
    });

    expect(await rejection(task)).toBeInstanceOf(TaskCancelledError);
    expect(h.log).toEqual(["sync@3", "fin@3"]);
    expect(isCancelled(atSleep)).toBe(true);
    expect(task.state).toBe("cancelled");
    expect(settleOfTask(h, task).at).toBe(3);
    await h.expectClean();
  });

  it("23: a child's cleanup error fails the parent that returned, and the replaced cancellation is reported", async () => {
    const h = createHarness();
    const moo = new Error("moo");
    let child: Task<void> | undefined;
    const root = h.run(function* root() {
      child = yield* spawn(function* child() {
        try {
          yield* suspend();
        } finally {
          // biome-ignore lint/correctness/noUnsafeFinally: the case is a finally that throws.
          throw moo;
        }
      });
      yield* sleep(1);
      return "foo";
    });

    expect(await rejection(root)).toBe(moo);
    expect(root.state).toBe("failed");
    expect(settleOfTask(h, root).at).toBe(1);
    const c = child!;
    const requests = h.eventsOf("cancel:request").filter((e) => e.taskId === c.id);
    expect(requests).toHaveLength(1);
    expect(requests[0]!.reason.kind).toBe("parent");
    expect(requests[0]!.at).toBe(1);
    expect(c.state).toBe("failed");
    expect(await rejection(c)).toBe(moo);
    const childSettle = settleOfTask(h, c);
    expect(childSettle.at).toBe(1);
    expect(childSettle.state).toBe("failed");
    const replaced = h.eventsOf("cancel:replaced").filter((e) => e.taskId === c.id);
    expect(replaced).toHaveLength(1);
    expect(replaced[0]!.error).toBe(moo);
    expect(replaced[0]!.reason.kind).toBe("parent");
    await h.expectClean();
  });

  it("24: a child's failure cancels the parent body; the parent fails with that error after its async cleanup", async () => {
    const h = createHarness();
    const boom = new Error("boom");
    let willBoom: Task<void> | undefined;
    const states: string[] = [];
    const parent: Task<void> = h.run(function* P() {
      willBoom = yield* spawn(function* willBoom() {
        yield* sleep(5);
        throw boom;
      });
      try {
        yield* suspend();
      } catch (e) {
        h.mark(`saw:${isCancelled(e) ? e.reason.kind : "not-cancelled"}`);
        states.push(`${parent.state}@5`);
        throw e;
      } finally {
        yield* sleep(20);
        h.mark("didRun");
      }
    });
    atTime(h, 4, () => states.push(`${parent.state}@4`));
    atTime(h, 15, () => states.push(`${parent.state}@15`));
    atTime(h, 24, () => states.push(`${parent.state}@24`));

    expect(await rejection(parent)).toBe(boom);
    expect(h.log).toEqual(["saw:child-failed@5", "didRun@25"]);
    expect(states).toEqual(["running@4", "cancelling@5", "cancelling@15", "cancelling@24"]);
    expect(parent.state).toBe("failed");
    expect(settleOfTask(h, parent).at).toBe(25);
    expect(willBoom!.state).toBe("failed");
    expect(settleOfTask(h, willBoom!).at).toBe(5);
    await h.expectClean();
  });

  it("25a: async cleanup in finally runs to completion within the budget", async () => {
    const h = createHarness();
    const T = h.run(function* T() {
      try {
        yield* suspend();
      } finally {
        yield* sleep(10);
        h.mark("done");
      }
    });

    expect(await cancelAt(h, T, 10)).toBe(20);
    expect(h.log).toEqual(["done@20"]);
    expect(T.state).toBe("cancelled");
    expect(h.eventsOf("cleanup:overrun")).toEqual([]);
    await h.expectClean();
  });

  it("25b: a cleanup that never completes is cut at the default budget of 5000 ms, and the overrun is reported", async () => {
    const h = createHarness();
    let cut: unknown;
    const T = h.run(function* T() {
      try {
        yield* suspend();
      } finally {
        try {
          yield* suspend();
        } catch (e) {
          cut = e;
          h.mark("cut");
          // biome-ignore lint/correctness/noUnsafeFinally: the case observes the cut, then lets it unwind.
          throw e;
        }
        h.mark("done");
      }
    });

    expect(await cancelAt(h, T, 10)).toBe(5010);
    expect(h.log).toEqual(["cut@5010"]);
    expect(isCancelled(cut)).toBe(true);
    expect((cut as Cancelled).reason.kind).toBe("cleanup-overrun");
    expect(T.state).toBe("cancelled");
    expect(settleOfTask(h, T).at).toBe(5010);
    const overruns = h.eventsOf("cleanup:overrun");
    expect(overruns).toHaveLength(1);
    expect(overruns[0]).toMatchObject({ path: T.path, taskId: T.id, waitingOn: "suspend()", at: 5010 });
    await h.expectClean();
  });

  it("25c: withCleanupBudget(200) cuts a hung cleanup at 200 ms after delivery", async () => {
    const h = createHarness();
    let cut: unknown;
    const T = h.run(
      () =>
        withCleanupBudget(200, function* body() {
          try {
            yield* suspend();
          } finally {
            try {
              yield* suspend();
            } catch (e) {
              cut = e;
              h.mark("cut");
              // biome-ignore lint/correctness/noUnsafeFinally: the case observes the cut, then lets it unwind.
              throw e;
            }
            h.mark("done");
          }
        }),
      { name: "T" },
    );

    expect(await cancelAt(h, T, 10)).toBe(210);
    expect(h.log).toEqual(["cut@210"]);
    expect((cut as Cancelled).reason.kind).toBe("cleanup-overrun");
    expect(T.state).toBe("cancelled");
    expect(settleOfTask(h, T).at).toBe(210);
    const overruns = h.eventsOf("cleanup:overrun");
    expect(overruns).toHaveLength(1);
    expect(overruns[0]).toMatchObject({ path: T.path, waitingOn: "suspend()", at: 210 });
    await h.expectClean();
  });

  it("26: nested yield* frames unwind innermost first, each finally suspending, and code after a cancelled yield* never runs", async () => {
    const h = createHarness();
    function* L3(): Operation<void> {
      try {
        yield* suspend();
      } finally {
        yield* sleep(5);
        h.mark("L3");
      }
    }
    function* L2(): Operation<void> {
      try {
        yield* L3();
        h.mark("after3");
      } finally {
        yield* sleep(5);
        h.mark("L2");
      }
      h.mark("after2.tail");
    }
    function* L1(): Operation<void> {
      try {
        yield* L2();
        h.mark("after2");
      } finally {
        yield* sleep(5);
        h.mark("L1");
      }
      h.mark("after1");
    }
    const T = h.run(L1);

    expect(await cancelAt(h, T, 10)).toBe(25);
    expect(h.log).toEqual(["L3@15", "L2@20", "L1@25"]);
    expect(T.state).toBe("cancelled");
    expect(await rejection(T)).toBeInstanceOf(TaskCancelledError);
    await h.expectClean();
  });

  it("27a: a finally can open a new group, which starts uncancelled and runs to completion", async () => {
    const h = createHarness();
    const T = h.run(function* T() {
      try {
        yield* suspend();
      } finally {
        yield* all([
          function* flushA() {
            yield* sleep(30);
            h.mark("flushA");
          },
          function* flushB() {
            yield* sleep(50);
            h.mark("flushB");
          },
        ]);
      }
    });

    expect(await cancelAt(h, T, 10)).toBe(60);
    expect(h.log).toEqual(["flushA@40", "flushB@60"]);
    expect(T.state).toBe("cancelled");
    expect(settleOfTask(h, T).at).toBe(60);
    const flushes = h
      .eventsOf("task:settle")
      .filter((e) => /flush[AB]#\d+$/.test(e.path))
      .map((e) => `${e.path.replace(/.*\/|#\d+$/g, "")}:${e.state}@${e.at}`);
    expect(flushes).toEqual(["flushA:completed@40", "flushB:completed@60"]);
    await h.expectClean();
  });

  it("27b: spawn driven by hand outside any task throws a typed error at once and starts nothing", async () => {
    let ran = false;
    const op = spawn(function* neverRuns() {
      ran = true;
    });
    const it = op[Symbol.iterator]();
    let thrown: unknown;
    try {
      let r = it.next();
      while (!r.done) r = it.next(undefined);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(KeelError);
    expect((thrown as KeelError).code).toBe("KEEL_NO_TASK");
    expect((thrown as KeelError).message).toMatch(/spawn/);
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(ran).toBe(false);
  });

  it("27b: spawning into a scope that has finished throws KEEL_SCOPE_CLOSED at once and starts nothing", async () => {
    const h = createHarness();
    let ran = 0;
    const op = function* neverRuns() {
      ran++;
    };
    const errors: unknown[] = [];
    const root = h.run(function* root() {
      const inner = yield* scoped(function* block() {
        return yield* useScope();
      });
      expect(inner.closed).toBe(true);
      try {
        inner.spawn(op);
      } catch (e) {
        errors.push(e);
      }
      return yield* useScope();
    });
    const rootScope = await root;
    try {
      rootScope.spawn(op);
    } catch (e) {
      errors.push(e);
    }
    await new Promise<void>((resolve) => setImmediate(resolve));

    expect(errors).toHaveLength(2);
    for (const e of errors) {
      expect(e).toBeInstanceOf(KeelError);
      expect((e as KeelError).code).toBe("KEEL_SCOPE_CLOSED");
      expect((e as KeelError).message).toMatch(/neverRuns/);
    }
    expect(ran).toBe(0);
    await h.expectClean();
  });

  it("28a: the reason of T.cancel('deploy') travels to the caught Cancelled and to the joiner's TaskCancelledError", async () => {
    const h = createHarness();
    let seen: unknown;
    const T = h.run(function* T() {
      try {
        yield* suspend();
      } catch (e) {
        seen = e;
        h.mark(`T:${isCancelled(e) ? e.reason.kind : "?"}`);
        throw e;
      }
    });
    let joined: unknown;
    const joiner = h.run(function* joiner() {
      try {
        yield* T;
      } catch (e) {
        joined = e;
        h.mark(`joiner:${(e as Error).name}`);
      }
    });

    expect(await cancelAt(h, T, 10, "deploy")).toBe(10);
    await joiner;
    expect(byInstant(h.log)).toEqual(byInstant(["T:cancel@10", "joiner:TaskCancelledError@10"]));
    expect(isCancelled(seen)).toBe(true);
    const reason = (seen as Cancelled).reason;
    expect(reason.kind).toBe("cancel");
    expect(reason.at).toBe(10);
    expect(reason.message).toBe("deploy");
    expect(joined).toBeInstanceOf(TaskCancelledError);
    expect((joined as TaskCancelledError).reason).toEqual(reason);
    expect((joined as TaskCancelledError).message).toContain("deploy");
    await h.expectClean();
  });

  it("28b: a timeout's reason names that scope and its time, and the caller's TimeoutError states the budget", async () => {
    const h = createHarness();
    let seen: unknown;
    let caught: unknown;
    const root = h.run(function* root() {
      try {
        yield* timeout(100, function* body() {
          try {
            yield* suspend();
          } catch (e) {
            seen = e;
            h.mark(`body:${isCancelled(e) ? e.reason.kind : "?"}`);
            throw e;
          }
        });
      } catch (e) {
        caught = e;
        h.mark(`caller:${(e as Error).message}`);
      }
    });
    await root;

    expect(isCancelled(seen)).toBe(true);
    const reason = (seen as Cancelled).reason;
    expect(reason.kind).toBe("timeout");
    expect(reason.at).toBe(100);
    const fires = h.eventsOf("timeout:fire");
    expect(fires).toHaveLength(1);
    expect(reason.scope).toEqual(fires[0]!.scope);
    expect(reason.scope?.kind).toBe("timeout");
    expect(reason.message).toMatch(/timed out after 100 ms/);
    expect(caught).toBeInstanceOf(TimeoutError);
    expect((caught as TimeoutError).message).toMatch(/timed out after 100 ms/);
    expect(h.log).toEqual(["body:timeout@100", `caller:${(caught as TimeoutError).message}@100`]);
    await h.expectClean();
  });

  it("28c: a child still running when its scope's operation returns is cancelled with reason 'parent'", async () => {
    const h = createHarness();
    let seen: unknown;
    const root = h.run(function* root() {
      yield* scoped(function* block() {
        yield* spawn(function* child() {
          try {
            yield* suspend();
          } catch (e) {
            seen = e;
            h.mark(`child:${isCancelled(e) ? e.reason.kind : "?"}`);
            throw e;
          }
        });
        yield* sleep(5);
      });
      h.mark("scoped-returned");
    });
    await root;

    expect(h.log).toEqual(["child:parent@5", "scoped-returned@5"]);
    expect(isCancelled(seen)).toBe(true);
    expect((seen as Cancelled).reason.kind).toBe("parent");
    expect((seen as Cancelled).reason.at).toBe(5);
    await h.expectClean();
  });

  class KeyErr extends Error {}
  KeyErr.prototype.name = "KeyErr";

  /** Runs case 29: all([t1, t2, t4]); `t2` as given. Returns what all threw and the three tasks' settles. */
  async function runCase29(h: Harness, t2: () => Operation<unknown>, keyErr: KeyErr) {
    let caught: unknown;
    const root = h.run(function* root() {
      try {
        yield* all([
          function* t1() {
            try {
              yield* suspend();
            } finally {
              h.mark("t1.fin");
            }
          },
          t2,
          function* t4() {
            yield* sleep(5);
            throw keyErr;
          },
        ]);
      } catch (e) {
        caught = e;
        h.mark("all:threw");
      }
    });
    await root;
    const settle = (name: string) => {
      const s = h.eventsOf("task:settle").filter((e) => new RegExp(`/${name}#\\d+$`).test(e.path));
      expect(s).toHaveLength(1);
      return `${s[0]!.state}@${s[0]!.at}`;
    };
    return { caught, states: { t1: settle("t1"), t2: settle("t2"), t4: settle("t4") } };
  }

  it("29: a group's error carries no cancellation: all throws the child's error itself, with nothing attached", async () => {
    const h = createHarness();
    const keyErr = new KeyErr("key");
    const ownBefore = Object.getOwnPropertyNames(keyErr);
    const { caught, states } = await runCase29(
      h,
      function* t2() {
        try {
          yield* suspend();
        } finally {
          h.mark("t2.fin");
        }
      },
      keyErr,
    );

    expect(byInstant(h.log)).toEqual(byInstant(["t1.fin@5", "t2.fin@5", "all:threw@5"]));
    expect(caught).toBe(keyErr);
    expect(caught).not.toBeInstanceOf(AggregateError);
    expect((keyErr as { suppressed?: unknown[] }).suppressed ?? []).toEqual([]);
    expect(keyErr.cause).toBeUndefined();
    expect(Object.getOwnPropertyNames(keyErr)).toEqual(ownBefore);
    expect(h.eventsOf("error:suppressed")).toEqual([]);
    expect(states).toEqual({ t1: "cancelled@5", t2: "cancelled@5", t4: "failed@5" });
    await h.expectClean();
  });

  it("29 (variant): a sibling that swallows Cancelled and returns still ends cancelled, its value dropped and reported", async () => {
    const h = createHarness();
    const keyErr = new KeyErr("key");
    const { caught, states } = await runCase29(
      h,
      function* t2() {
        try {
          yield* suspend();
        } catch {
          return "x";
        } finally {
          h.mark("t2.fin");
        }
      },
      keyErr,
    );

    expect(byInstant(h.log)).toEqual(byInstant(["t1.fin@5", "t2.fin@5", "all:threw@5"]));
    expect(caught).toBe(keyErr);
    expect((keyErr as { suppressed?: unknown[] }).suppressed ?? []).toEqual([]);
    expect(h.eventsOf("error:suppressed")).toEqual([]);
    expect(states).toEqual({ t1: "cancelled@5", t2: "cancelled@5", t4: "failed@5" });
    const swallows = h.eventsOf("cleanup:swallow");
    expect(swallows).toHaveLength(1);
    expect(swallows[0]!.path).toMatch(/\/t2#\d+$/);
    expect(swallows[0]!.at).toBe(5);
    await h.expectClean();
  });
});

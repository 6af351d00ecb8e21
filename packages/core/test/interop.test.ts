import {
  action,
  call,
  run,
  scoped,
  sleep,
  spawn,
  suspend,
  TaskCancelledError,
  timeout,
  until,
  useAbortSignal,
} from "@keel/core";
import { createHarness } from "@keel/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

const unhandled: unknown[] = [];
const onUnhandled = (e: unknown) => unhandled.push(e);
beforeEach(() => {
  unhandled.length = 0;
  process.on("unhandledRejection", onUnhandled);
});
afterEach(async () => {
  // Node reports unhandled rejections once the microtask queue is empty: one macrotask turn suffices.
  await new Promise((r) => setImmediate(r));
  process.off("unhandledRejection", onUnhandled);
  expect(unhandled).toEqual([]);
});

describe("promise interop", () => {
  it("call's signal aborts when a timeout cancels the call, and a late rejection is ignored", async () => {
    const h = createHarness();
    let rejectLate!: (e: unknown) => void;
    let abortedAt = -1;
    const t = h.run(() =>
      timeout(50, () =>
        call(
          (signal) =>
            new Promise((_, reject) => {
              rejectLate = reject;
              signal.addEventListener("abort", () => {
                abortedAt = h.clock.now();
              });
            }),
        ),
      ),
    );
    await expect(t).rejects.toMatchObject({ name: "TimeoutError", timeoutMs: 50 });
    expect(abortedAt).toBe(50);
    rejectLate(new Error("late"));
    await h.expectClean();
  });

  it("call's signal does not abort when the call settles normally", async () => {
    const h = createHarness();
    let signal!: AbortSignal;
    const v = await h.run(() =>
      call((s) => {
        signal = s;
        return Promise.resolve(7);
      }),
    );
    expect(v).toBe(7);
    expect(signal.aborted).toBe(false);
    await h.expectClean();
  });

  it("call is never invoked when a cancellation is already due", async () => {
    const h = createHarness();
    let invoked = false;
    const t = h.run(function* () {
      h.clock.advance(0);
      yield* timeout(10, function* () {
        h.clock.advance(10);
        yield* call(() => {
          invoked = true;
        });
      });
    });
    await expect(t).rejects.toMatchObject({ name: "TimeoutError" });
    expect(invoked).toBe(false);
    await h.expectClean();
  });

  it("action's teardown runs exactly once, on resolve and on cancellation", async () => {
    const h = createHarness();
    const teardowns: string[] = [];
    const v = await h.run(() =>
      action<number>((resolve) => {
        const off = h.clock.schedule(5, () => resolve(1));
        return () => {
          off();
          teardowns.push(`resolved@${h.clock.now()}`);
        };
      }),
    );
    expect(v).toBe(1);
    const t = h.run(() =>
      timeout(20, () =>
        action<number>(() => () => {
          teardowns.push(`cancelled@${h.clock.now()}`);
        }),
      ),
    );
    await expect(t).rejects.toMatchObject({ name: "TimeoutError" });
    expect(teardowns).toEqual(["resolved@5", "cancelled@25"]);
    await h.expectClean();
  });

  it("until abandons a promise on cancellation and handles its later rejection", async () => {
    const h = createHarness();
    let reject!: (e: unknown) => void;
    const p = new Promise<number>((_, r) => {
      reject = r;
    });
    const t = h.run(function* waiter() {
      return yield* until(p);
    });
    await new Promise((r) => setImmediate(r));
    await t.cancel();
    reject(new Error("too late"));
    await expect(t).rejects.toBeInstanceOf(TaskCancelledError);
    await h.expectClean();
  });

  it("until and action operations run again, one after another and in two tasks at once", async () => {
    const h = createHarness();
    let started = 0;
    const tick = action<number>((resolve) => {
      const n = ++started;
      const t = setImmediate(() => resolve(n));
      return () => clearImmediate(t);
    });
    const answer = until(Promise.resolve(42));
    const seen = await h.run(function* reruns() {
      const first = [yield* tick, yield* tick, yield* answer, yield* answer];
      const a = yield* spawn(function* a() {
        return [yield* tick, yield* answer];
      });
      const b = yield* spawn(function* b() {
        return [yield* tick, yield* answer];
      });
      return [...first, ...(yield* a), ...(yield* b)];
    });
    expect(started).toBe(4);
    expect(seen.slice(0, 4)).toEqual([1, 2, 42, 42]);
    // The two tasks wait at the same operations concurrently: each gets its own run.
    expect([seen[4], seen[6]].sort()).toEqual([3, 4]);
    expect([seen[5], seen[7]]).toEqual([42, 42]);
    await h.expectClean();
  });

  it("an operation made once waits afresh on every run, also after a run that was cancelled or failed", async () => {
    const h = createHarness();
    let started = 0;
    let tornDown = 0;
    const pending: Array<(n: number) => void> = [];
    const wait = action<number>((resolve) => {
      started++;
      pending.push(resolve);
      return () => {
        tornDown++;
      };
    });
    const log = await h.run(function* reruns() {
      const out: string[] = [];
      // A run cut by a timeout: the next run must wait again, not see the old run's state.
      try {
        yield* timeout(10, () => wait);
      } catch (e) {
        out.push((e as Error).name);
      }
      const later = yield* spawn(function* later() {
        yield* sleep(5);
        pending.at(-1)!(7);
      });
      out.push(`value ${yield* wait}`);
      yield* later;
      // A run whose body throws into the wait (a rejecting promise) ends it too.
      try {
        yield* until(Promise.reject(new Error("no")));
      } catch (e) {
        out.push((e as Error).message);
      }
      const again = yield* spawn(function* again() {
        yield* sleep(5);
        pending.at(-1)!(8);
      });
      out.push(`value ${yield* wait}`);
      yield* again;
      return out;
    });
    expect(log).toEqual(["TimeoutError", "value 7", "no", "value 8"]);
    expect(started).toBe(3);
    expect(tornDown).toBe(3);
    await h.expectClean();
  });

  it("until passes a rejection through unchanged", async () => {
    const h = createHarness();
    const boom = new Error("boom");
    await expect(h.run(() => until(Promise.reject(boom)))).rejects.toBe(boom);
    await h.expectClean();
  });

  it("useAbortSignal aborts when its scope ends, however it ends", async () => {
    const h = createHarness();
    const s = await h.run(function* () {
      const signal = yield* scoped(useAbortSignal);
      return signal.aborted;
    });
    expect(s).toBe(true);
    await h.expectClean();
  });

  it("await task works from plain async code for values, errors and cancellations", async () => {
    const h = createHarness();
    expect(
      await h.run(function* () {
        yield* sleep(1);
        return "v";
      }),
    ).toBe("v");
    const e = new Error("e");
    await expect(
      h.run(function* () {
        yield* sleep(1);
        throw e;
      }),
    ).rejects.toBe(e);
    const c = h.run(function* () {
      yield* sleep(100);
    });
    c.cancel("stop");
    await expect(c).rejects.toMatchObject({
      name: "TaskCancelledError",
      reason: { kind: "cancel", message: "stop" },
    });
    await h.expectClean();
  });

  it("a cancelled task that nobody awaits raises no unhandled rejection (a failed one does: unhandled-root.test.ts)", async () => {
    const t = run(suspend);
    t.cancel("not needed");
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(t.state).toBe("cancelled");
  });

  it("yielding a promise without until throws a typed error naming the fix", async () => {
    const h = createHarness();
    const t = h.run(function* () {
      yield Promise.resolve(1) as never;
    });
    await expect(t).rejects.toMatchObject({
      code: "KEEL_NOT_AN_INSTRUCTION",
      message: expect.stringContaining("until(promise)"),
    });
    await h.expectClean();
  });

  it("a spawned child's body starts on the next turn, so cancelling it at once runs no user code", async () => {
    const h = createHarness();
    let ran = false;
    await h.run(function* () {
      const child = yield* spawn(function* () {
        ran = true;
      });
      yield* child.cancel();
      expect(child.state).toBe("cancelled");
    });
    expect(ran).toBe(false);
    await h.expectClean();
  });
});

/**
 * The real clock: order of firing, cancellation, and what keeps the process alive. Real time, so
 * every timer here is due within a few milliseconds and nothing asserts how long anything took. On a
 * busy machine a host timer can fire late, so timers due at different instants may share a batch:
 * the tests assert only what holds either way.
 */

import { createVirtualClock } from "@keel/testing";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  type Clock,
  remaining,
  run,
  sleep,
  snapshot,
  spawn,
  suspend,
  type Task,
  timeout,
} from "../src/index.js";
import { hostTimers } from "../src/kernel/host.js";
import type { TaskImpl } from "../src/kernel/task.js";
import { createRealClock, realClock } from "../src/time/real-clock.js";

const MAX_HOST_DELAY_MS = 2 ** 31 - 1;
const DAY_MS = 86_400_000;

type Handle = ReturnType<typeof setTimeout> | ReturnType<typeof setImmediate>;

/**
 * Counts the host timers made from now on that are armed and keep the process alive. Only the timers
 * made through the spied functions count, so other timers of the process (the test runner's) cannot
 * change the figure.
 */
function trackHostTimers(): { held(): number } {
  const armed = new Set<Handle>();
  const { setTimeout: hostTimeout, setImmediate: hostImmediate } = hostTimers;
  const { clearTimeout: realClearTimeout, clearImmediate: realClearImmediate } = hostTimers;
  vi.spyOn(hostTimers, "setTimeout").mockImplementation(((fn: () => void, ms?: number) => {
    const handle = hostTimeout(() => {
      armed.delete(handle);
      fn();
    }, ms);
    armed.add(handle);
    return handle;
  }) as typeof setTimeout);
  vi.spyOn(hostTimers, "setImmediate").mockImplementation(((fn: () => void) => {
    const handle = hostImmediate(() => {
      armed.delete(handle);
      fn();
    });
    armed.add(handle);
    return handle;
  }) as typeof setImmediate);
  vi.spyOn(hostTimers, "clearTimeout").mockImplementation((handle) => {
    armed.delete(handle as Handle);
    realClearTimeout(handle);
  });
  vi.spyOn(hostTimers, "clearImmediate").mockImplementation((handle) => {
    armed.delete(handle as Handle);
    realClearImmediate(handle);
  });
  return { held: () => [...armed].filter((h) => h.hasRef()).length };
}

function untilFired(count: () => number, n: number): Promise<void> {
  return new Promise((resolve) => {
    const poll = () => (count() >= n ? resolve() : setTimeout(poll, 1));
    poll();
  });
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("createRealClock", () => {
  it("fires by instant, and timers due at the same instant in registration order, in one batch", async () => {
    const clock = createRealClock();
    const at = clock.now() + 3;
    const fired: string[] = [];
    clock.schedule(at + 2, () => fired.push("later"));
    clock.schedule(at, () => fired.push("a"));
    clock.schedule(at, () => {
      fired.push("b");
      // Queued from inside the batch: runs only after every timer of the batch.
      queueMicrotask(() => fired.push("microtask"));
    });
    clock.schedule(at, () => fired.push("c"));
    await untilFired(() => fired.length, 5);
    // "later" is in the same batch when the host timer fired late (then before the microtask), or in
    // a batch of its own (then after it): either way after every timer due before it.
    expect(fired.filter((f) => f !== "later")).toEqual(["a", "b", "c", "microtask"]);
    expect(fired.indexOf("later")).toBeGreaterThan(fired.indexOf("c"));
  });

  it("never fires a cancelled timer, and cancelling twice is harmless", async () => {
    const clock = createRealClock();
    const fired: string[] = [];
    const cancel = clock.schedule(clock.now() + 1, () => fired.push("cancelled"));
    clock.schedule(clock.now() + 4, () => fired.push("kept"));
    cancel();
    cancel();
    // Timers fire in time order: had the cancelled one fired, it would be listed before "kept".
    await untilFired(() => fired.length, 1);
    expect(fired).toEqual(["kept"]);
  });

  it("keeps the process alive only while a live timer waits", async () => {
    const host = trackHostTimers();
    const clock = createRealClock();
    const cancelFar = clock.schedule(clock.now() + 60_000, () => {});
    expect(host.held()).toBe(1);
    cancelFar();
    // Cancelled: the host timer may stay armed, but it no longer holds the process.
    expect(host.held()).toBe(0);
    let fired = false;
    clock.schedule(clock.now() + 2, () => {
      fired = true;
    });
    expect(host.held()).toBe(1);
    await untilFired(() => (fired ? 1 : 0), 1);
    expect(host.held()).toBe(0);
  });

  it("cancelling timers anywhere in the heap keeps the rest in order, also from inside a batch", async () => {
    // Every timer is already due, so the batch fires from setImmediate with no wait: 400 timers at
    // 40 instants (10 each, so ties exercise the registration order), half of them cancelled at
    // random places in the heap, and one timer that cancels another of its own batch.
    const clock = createRealClock();
    const base = clock.now() - 1_000;
    let seed = 7;
    const rand = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const expected: { at: number; i: number }[] = [];
    const fired: number[] = [];
    const cancels: (() => void)[] = [];
    for (let i = 0; i < 400; i++) {
      const at = base + Math.floor(rand() * 40);
      cancels.push(clock.schedule(at, () => fired.push(i)));
      expected.push({ at, i });
    }
    const cancelled = new Set<number>();
    for (let k = 0; k < 200; k++) {
      const i = Math.floor(rand() * 400);
      cancels[i]!();
      cancelled.add(i);
    }
    // The first timer of the batch cancels the last one still live, which the batch already holds.
    const kept = expected.filter((e) => !cancelled.has(e.i)).sort((a, b) => a.at - b.at || a.i - b.i);
    const victim = kept.at(-1)!.i;
    clock.schedule(base - 1, () => cancels[victim]!());
    await untilFired(() => fired.length, kept.length - 1);
    expect(fired).toEqual(kept.slice(0, -1).map((e) => e.i));
  });

  it("arms and cancels a timeout per request many times over, and still fires the one left", async () => {
    const host = trackHostTimers();
    const clock = createRealClock();
    for (let i = 0; i < 5000; i++) clock.schedule(clock.now() + 30_000 + i, () => {})();
    let fired = 0;
    clock.schedule(clock.now() + 2, () => fired++);
    await untilFired(() => fired, 1);
    expect(fired).toBe(1);
    expect(host.held()).toBe(0);
  });

  it("a timer further away than a host timer can wait is armed at the host's limit, without a warning", () => {
    const warn = vi.spyOn(process, "emitWarning");
    const setTimeoutSpy = vi.spyOn(hostTimers, "setTimeout");
    const clock = createRealClock();
    const cancelFar = clock.schedule(clock.now() + 30 * DAY_MS, () => {});
    const cancelNever = clock.schedule(Infinity, () => {});
    cancelFar();
    cancelNever();
    expect(setTimeoutSpy.mock.calls.map((c) => c[1])).toEqual([MAX_HOST_DELAY_MS]);
    expect(warn).not.toHaveBeenCalled();
  });

  it("when the host wakes at its limit with nothing due, it re-arms at the limit and fires nothing", () => {
    const delays: number[] = [];
    let wake: (() => void) | null = null;
    const handle = { ref: () => handle, unref: () => handle, hasRef: () => true };
    vi.spyOn(hostTimers, "setTimeout").mockImplementation(((fn: () => void, ms?: number) => {
      delays.push(ms ?? 0);
      wake = fn;
      return handle;
    }) as unknown as typeof setTimeout);
    vi.spyOn(hostTimers, "clearTimeout").mockImplementation(() => {});
    const clock = createRealClock();
    let fired = false;
    const cancel = clock.schedule(clock.now() + 30 * DAY_MS, () => {
      fired = true;
    });
    expect(delays).toEqual([MAX_HOST_DELAY_MS]);

    wake!();

    expect(fired).toBe(false);
    expect(delays).toEqual([MAX_HOST_DELAY_MS, MAX_HOST_DELAY_MS]);
    cancel();
  });
});

describe("observability stamps (task starts, wait starts)", () => {
  /** A parent spawns two children in one step, waits `gapMs` on its clock, spawns one more. */
  async function startsOnce(clock: Clock, gapMs: number): Promise<number[]> {
    const tasks: Task<never>[] = [];
    await run(
      function* parent() {
        tasks.push(yield* spawn(suspend, { name: "a" }));
        tasks.push(yield* spawn(suspend, { name: "b" }));
        yield* sleep(gapMs);
        tasks.push(yield* spawn(suspend, { name: "c" }));
      },
      { clock },
    );
    return tasks.map((t) => (t as unknown as TaskImpl<never>).startedAt);
  }

  it("on the real clock, stamps share one reading within a millisecond, and a later one reads again", async () => {
    // The coarse reading is refreshed by a 1 ms interval and by every timer batch. The interval alone
    // is not enough: when the sleep's first step is slow (a loaded machine), its timer is already due
    // when armed and fires from setImmediate, before any timers phase could tick the interval.
    const [a, b, c] = await startsOnce(realClock, 3);
    expect(a).toBe(b);
    expect(c).toBeGreaterThanOrEqual(a! + 3);
    expect(c).toBeLessThanOrEqual(realClock.now());
  });

  it("on the real clock, a wait's age in the task tree is never negative and never ahead of the clock", async () => {
    const root = run(function* waiter() {
      yield* sleep(5);
    });
    await new Promise((resolve) => setTimeout(resolve, 2));
    const s = snapshot(root);
    expect(s.waitingOn).toBe("sleep(5)");
    expect(s.waitingForMs).toBeGreaterThanOrEqual(0);
    expect(s.waitingForMs).toBeLessThanOrEqual(s.ageMs);
    await root;
  });

  it("a stamp taken after a timer's wake-up is never before the timer's instant, even when the timer fired before the interval ticked", async () => {
    // A timer already due when armed fires from setImmediate, which runs before the event loop's
    // next timers phase, so the 1 ms interval has not ticked yet: only the batch marks the stamps'
    // reading stale (on a loaded machine, a slow first step of a sleep did this; a CI failure).
    const clock = createRealClock();
    const startedAt = async () => {
      let task: Task<never> | null = null;
      await run(
        function* parent() {
          task = yield* spawn(suspend, { name: "stamped" });
        },
        { clock },
      );
      return (task as unknown as TaskImpl<never>).startedAt;
    };
    const before = await startedAt();
    const spunUntil = clock.now() + 3;
    while (clock.now() < spunUntil) {
      // a synchronous stretch of 3 ms: no event of the host (no interval tick) can run in it
    }
    const due = clock.now() - 1;
    await new Promise<void>((resolve) => clock.schedule(due, resolve));
    const after = await startedAt();
    expect(after).toBeGreaterThanOrEqual(due);
    expect(after).toBeGreaterThanOrEqual(before + 3);
  });

  it("a clock without a coarse reading (a user's, a virtual one) is read for every stamp", async () => {
    let reads = 0;
    const counting: Clock = {
      now: () => ++reads,
      schedule: (_at, fn) => realClock.schedule(realClock.now() + 1, fn),
    };
    const [a, b, c] = await startsOnce(counting, 1);
    expect(b).toBe(a! + 1);
    expect(c).toBeGreaterThan(b!);
  });
});

describe("remaining() is whole milliseconds, rounded down", () => {
  it("on the real clock, which reads fractions of a millisecond", async () => {
    const left = await run(() => timeout(60_000, remaining));
    expect(Number.isInteger(left)).toBe(true);
    expect(left).toBeLessThanOrEqual(60_000);
  });

  it("on a clock at a fractional instant: 9.6 ms left reads 9", async () => {
    const left = await run(
      () =>
        timeout(10, function* () {
          yield* sleep(0.4);
          return yield* remaining();
        }),
      { clock: createVirtualClock() },
    );
    expect(left).toBe(9);
  });
});

/**
 * The real clock: order of firing, cancellation, and what keeps the process alive. Real time, so
 * every timer here is due within a few milliseconds and nothing asserts how long anything took.
 */
import { describe, expect, it } from "vitest";
import { type Clock, run, sleep, snapshot, spawn, suspend, type Task } from "../src/index.js";
import type { TaskImpl } from "../src/kernel/task.js";
import { createRealClock, realClock } from "../src/time/real-clock.js";

/** The host timers that keep the process alive now (unref'd ones are not listed). */
function heldTimers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === "Timeout" || r === "Immediate").length;
}

function untilFired(count: () => number, n: number): Promise<void> {
  return new Promise((resolve) => {
    const poll = () => (count() >= n ? resolve() : setTimeout(poll, 1));
    poll();
  });
}

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
    expect(fired).toEqual(["a", "b", "c", "microtask", "later"]);
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
    const before = heldTimers();
    const clock = createRealClock();
    const cancelFar = clock.schedule(clock.now() + 60_000, () => {});
    expect(heldTimers()).toBe(before + 1);
    cancelFar();
    // Cancelled: the host timer may stay armed, but it no longer holds the process.
    expect(heldTimers()).toBe(before);
    let fired = false;
    clock.schedule(clock.now() + 2, () => {
      fired = true;
    });
    expect(heldTimers()).toBe(before + 1);
    await untilFired(() => (fired ? 1 : 0), 1);
    expect(heldTimers()).toBe(before);
  });

  it("arms and cancels a timeout per request many times over, and still fires the one left", async () => {
    const before = heldTimers();
    const clock = createRealClock();
    for (let i = 0; i < 5000; i++) clock.schedule(clock.now() + 30_000 + i, () => {})();
    let fired = 0;
    clock.schedule(clock.now() + 2, () => fired++);
    await untilFired(() => fired, 1);
    expect(fired).toBe(1);
    expect(heldTimers()).toBe(before);
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
    // The coarse reading is refreshed by a 1 ms interval made before the 3 ms sleep's timer, so it
    // has ticked by the time the sleep ends.
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

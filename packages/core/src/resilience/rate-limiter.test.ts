import {
  createRateLimiter,
  type RateLimiter,
  sleep,
  type Task,
  TaskCancelledError,
  TimeoutError,
  timeout,
} from "@keel/core";
import { createHarness, type Harness } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { rejection } from "../../test/support/errors.js";

/** A root task that sleeps `at`, takes a token and logs `who took`. */
function takerAt(h: Harness, limiter: RateLimiter, who: string, at: number): Task<void> {
  return h.run(
    function* taker() {
      yield* sleep(at);
      yield* limiter.take();
      h.mark(`${who} took`);
    },
    { name: who },
  );
}

describe("createRateLimiter", () => {
  it("starts with a full bucket: burst takes return at once, then one per interval", async () => {
    const h = createHarness();
    const limiter = createRateLimiter({ perSecond: 10, burst: 3 });
    const seen: string[] = [];
    await h.run(function* taker() {
      for (let i = 1; i <= 5; i++) {
        yield* limiter.take();
        h.mark(`take ${i}`);
        if (i === 3) seen.push(`waiting ${limiter.waiting}, timers ${h.clock.pendingTimers}`);
      }
    });

    expect(h.log).toEqual(["take 1@0", "take 2@0", "take 3@0", "take 4@100", "take 5@200"]);
    expect(seen).toEqual(["waiting 0, timers 0"]);
    expect(limiter.perSecond).toBe(10);
    expect(limiter.burst).toBe(3);
    await h.expectClean();
  });

  it("refills from the clock: a partial token waits for the rest, an idle bucket fills only up to burst", async () => {
    const h = createHarness();
    const limiter = createRateLimiter({ perSecond: 4, burst: 2 });
    await h.run(function* taker() {
      yield* limiter.take();
      yield* limiter.take();
      h.mark("drained");
      yield* sleep(100);
      yield* limiter.take();
      h.mark("partial refill");
      yield* sleep(750);
      for (let i = 1; i <= 3; i++) {
        yield* limiter.take();
        h.mark(`after idle ${i}`);
      }
    });

    expect(h.log).toEqual([
      "drained@0",
      "partial refill@250",
      "after idle 1@1000",
      "after idle 2@1000",
      "after idle 3@1250",
    ]);
    await h.expectClean();
  });

  it("the default burst is 1", async () => {
    const h = createHarness();
    const limiter = createRateLimiter({ perSecond: 20 });
    await h.run(function* taker() {
      for (let i = 1; i <= 3; i++) {
        yield* limiter.take();
        h.mark(`take ${i}`);
      }
    });

    expect(limiter.burst).toBe(1);
    expect(h.log).toEqual(["take 1@0", "take 2@50", "take 3@100"]);
    await h.expectClean();
  });

  it("serves waiters in the order they arrived", async () => {
    const h = createHarness();
    const limiter = createRateLimiter({ perSecond: 10 });
    const tasks = [
      takerAt(h, limiter, "first", 0),
      takerAt(h, limiter, "W3", 30),
      takerAt(h, limiter, "W1", 10),
      takerAt(h, limiter, "W2", 20),
    ];
    const probes: string[] = [];
    h.clock.schedule(50, () => probes.push(`waiting ${limiter.waiting}@50`));

    await Promise.all(tasks);
    expect(h.log).toEqual(["first took@0", "W1 took@100", "W2 took@200", "W3 took@300"]);
    expect(probes).toEqual(["waiting 3@50"]);
    await h.expectClean();
  });

  describe("cancellation", () => {
    it("a cancelled head waiter consumes no token: the next waiter gets it when it is due", async () => {
      const h = createHarness();
      const limiter = createRateLimiter({ perSecond: 10 });
      const first = takerAt(h, limiter, "first", 0);
      const head = takerAt(h, limiter, "head", 5);
      const next = takerAt(h, limiter, "next", 10);
      const probes: string[] = [];
      const driver = h.run(function* driver() {
        yield* sleep(50);
        void head.cancel();
        // Read at the end of the instant, once the cancellation has been delivered.
        yield* sleep(0);
        probes.push(`waiting ${limiter.waiting}@${h.clock.now()}`);
      });

      expect(await rejection(head)).toBeInstanceOf(TaskCancelledError);
      await Promise.all([first, next, driver]);
      expect(h.log).toEqual(["first took@0", "next took@100"]);
      expect(probes).toEqual(["waiting 1@50"]);
      expect(limiter.waiting).toBe(0);
      await h.expectClean();
    });

    it("a token granted to a waiter cancelled in the same instant goes back to the bucket", async () => {
      const h = createHarness();
      const limiter = createRateLimiter({ perSecond: 10 });
      const first = takerAt(h, limiter, "first", 0);
      const granted = takerAt(h, limiter, "granted", 0);
      const behind = takerAt(h, limiter, "behind", 10);
      // Registered at 20, after the limiter's timer for 100, so it fires just after the grant.
      h.clock.schedule(20, () => {
        h.clock.schedule(100, () => void granted.cancel());
      });

      expect(await rejection(granted)).toBeInstanceOf(TaskCancelledError);
      await Promise.all([first, behind]);
      expect(h.log).toEqual(["first took@0", "behind took@100"]);
      expect(limiter.waiting).toBe(0);
      await h.expectClean();
    });

    it("a take bounded by a timeout gives up at the deadline and leaves its token for the next taker", async () => {
      const h = createHarness();
      const limiter = createRateLimiter({ perSecond: 10 });
      const seen: string[] = [];
      await h.run(function* taker() {
        yield* limiter.take();
        try {
          yield* timeout(50, limiter.take());
        } catch (e) {
          if (!(e instanceof TimeoutError)) throw e;
          seen.push(
            `timed out@${h.clock.now()}: waiting ${limiter.waiting}, timers ${h.clock.pendingTimers}`,
          );
        }
        yield* limiter.take();
        h.mark("took");
      });

      expect(seen).toEqual(["timed out@50: waiting 0, timers 0"]);
      expect(h.log).toEqual(["took@100"]);
      await h.expectClean();
    });
  });

  describe("timers", () => {
    it("arms one timer while someone waits and none once the queue is empty", async () => {
      const h = createHarness();
      const limiter = createRateLimiter({ perSecond: 10 });
      const tasks = [takerAt(h, limiter, "a", 0), takerAt(h, limiter, "b", 0), takerAt(h, limiter, "c", 0)];
      const probes: string[] = [];
      // Each probe arms the next, so no other probe's timer is pending when one reads.
      const probe = (ats: number[]) => {
        const [at, ...rest] = ats;
        if (at === undefined) return;
        h.clock.schedule(at, () => {
          probes.push(`waiting ${limiter.waiting}, timers ${h.clock.pendingTimers}@${at}`);
          probe(rest);
        });
      };
      probe([50, 150]);

      await Promise.all(tasks);
      expect(h.log).toEqual(["a took@0", "b took@100", "c took@200"]);
      expect(probes).toEqual(["waiting 2, timers 1@50", "waiting 1, timers 1@150"]);
      expect(`waiting ${limiter.waiting}, timers ${h.clock.pendingTimers}`).toBe("waiting 0, timers 0");
      await h.expectClean();
    });

    it("cancelling the only waiter removes the limiter's timer at once", async () => {
      const h = createHarness();
      const limiter = createRateLimiter({ perSecond: 1 });
      const first = takerAt(h, limiter, "first", 0);
      const waiter = takerAt(h, limiter, "waiter", 10);
      const probes: string[] = [];
      const after = h.run(function* driver() {
        yield* sleep(20);
        probes.push(`waiting ${limiter.waiting}, timers ${h.clock.pendingTimers}@${h.clock.now()}`);
        void waiter.cancel();
        // Read at the end of the instant, once the cancellation has been delivered.
        yield* sleep(0);
        probes.push(`waiting ${limiter.waiting}, timers ${h.clock.pendingTimers}@${h.clock.now()}`);
      });

      expect(await rejection(waiter)).toBeInstanceOf(TaskCancelledError);
      await Promise.all([first, after]);
      expect(probes).toEqual(["waiting 1, timers 1@20", "waiting 0, timers 0@20"]);
      await h.expectClean();
    });
  });

  describe("bad options", () => {
    it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY, "10", undefined])(
      "perSecond %s is a RangeError naming perSecond",
      (perSecond) => {
        const make = () => createRateLimiter({ perSecond: perSecond as number });
        expect(make).toThrow(RangeError);
        expect(make).toThrow(/perSecond/);
        expect(make).toThrow(expect.objectContaining({ code: "KEEL_INVALID_ARGUMENT" }));
      },
    );

    it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "2"])(
      "burst %s is a RangeError naming burst",
      (burst) => {
        const make = () => createRateLimiter({ perSecond: 10, burst: burst as number });
        expect(make).toThrow(RangeError);
        expect(make).toThrow(/burst/);
      },
    );

    it("a missing options object is a RangeError naming perSecond", () => {
      const make = () => createRateLimiter(undefined as never);
      expect(make).toThrow(RangeError);
      expect(make).toThrow(/perSecond/);
    });
  });
});

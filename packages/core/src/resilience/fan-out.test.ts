import { forEachLimit, isCancelled, mapLimit, type Operation, sleep, TaskCancelledError } from "@keel/core";
import { createHarness, type Harness } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { byInstant } from "../../test/support/log.js";

/** An item function that sleeps `ms`, tracking how many run at once. */
function tracked(h: Harness) {
  const stats = { calls: 0, running: 0, maxRunning: 0 };
  const fn = (ms: number, index: number): Operation<string> => ({
    *[Symbol.iterator]() {
      stats.calls++;
      stats.running++;
      stats.maxRunning = Math.max(stats.maxRunning, stats.running);
      h.mark(`start ${index}`);
      try {
        yield* sleep(ms);
        return `item ${index} (${ms})`;
      } finally {
        stats.running--;
      }
    },
  });
  return { stats, fn };
}

describe("mapLimit", () => {
  it("returns the results in input order although they finish out of order", async () => {
    const h = createHarness();
    const { fn } = tracked(h);
    const results = await h.run(() => mapLimit([30, 10, 20, 5], 2, fn));

    expect(results).toEqual(["item 0 (30)", "item 1 (10)", "item 2 (20)", "item 3 (5)"]);
    expect(byInstant(h.log)).toEqual([
      new Set(["start 0@0", "start 1@0"]),
      new Set(["start 2@10"]),
      new Set(["start 3@30"]),
    ]);
    expect(h.clock.now()).toBe(35);
    await h.expectClean();
  });

  it("runs at most limit at once and starts the next item as soon as one finishes", async () => {
    const h = createHarness();
    const { stats, fn } = tracked(h);
    const items = Array.from({ length: 10 }, () => 100);
    const results = await h.run(() => mapLimit(items, 3, fn));

    expect(results).toHaveLength(10);
    expect(stats).toEqual({ calls: 10, running: 0, maxRunning: 3 });
    expect(byInstant(h.log).map((s) => s.size)).toEqual([3, 3, 3, 1]);
    expect(h.log.slice(-1)).toEqual(["start 9@300"]);
    expect(h.clock.now()).toBe(400);
    await h.expectClean();
  });

  it("starts every item at once when the limit is larger than the input", async () => {
    const h = createHarness();
    const { stats, fn } = tracked(h);
    await h.run(() => mapLimit([10, 20, 30], 10, fn));

    expect(stats.maxRunning).toBe(3);
    expect(h.log).toEqual(["start 0@0", "start 1@0", "start 2@0"]);
    expect(h.clock.now()).toBe(30);
    await h.expectClean();
  });

  it("accepts any iterable and passes each item with its index", async () => {
    const h = createHarness();
    function* letters() {
      yield "a";
      yield "b";
      yield "c";
    }
    const pairs = await h.run(() =>
      mapLimit(letters(), 2, function* pair(item, index) {
        yield* sleep(1);
        return `${index}:${item}`;
      }),
    );
    const fromSet = await h.run(() =>
      mapLimit(new Set([3, 4]), 1, function* double(n) {
        return n * 2;
      }),
    );

    expect(pairs).toEqual(["0:a", "1:b", "2:c"]);
    expect(fromSet).toEqual([6, 8]);
    await h.expectClean();
  });

  it("returns [] at once for an empty input, without calling fn", async () => {
    const h = createHarness();
    let calls = 0;
    const results = await h.run(() =>
      mapLimit([], 3, function* never() {
        calls++;
      }),
    );

    expect(results).toEqual([]);
    expect(calls).toBe(0);
    expect(h.clock.now()).toBe(0);
    await h.expectClean();
  });

  it("on the first failure cancels the running items, waits for their cleanup and starts no more", async () => {
    const h = createHarness();
    const first = new Error("a failed");
    const later = new Error("b cleanup failed");
    const started: string[] = [];
    let caught: unknown;
    await h.run(function* caller() {
      try {
        yield* mapLimit(["a", "b", "c", "d"], 2, function* item(name) {
          started.push(name);
          if (name === "a") {
            yield* sleep(10);
            throw first;
          }
          try {
            yield* sleep(100);
          } catch (e) {
            if (isCancelled(e)) h.mark(`${name} cancelled`);
            throw e;
          } finally {
            yield* sleep(15);
            h.mark(`${name} cleaned`);
            // biome-ignore lint/correctness/noUnsafeFinally: the case is a cleanup that throws.
            if (name === "b") throw later;
          }
        });
      } catch (e) {
        caught = e;
        h.mark("caught");
      }
    });

    expect(caught).toBe(first);
    expect((caught as { suppressed?: unknown[] }).suppressed).toEqual([later]);
    expect(Object.keys(caught as object)).not.toContain("suppressed");
    expect(h.eventsOf("error:suppressed").map((e) => e.error)).toContain(later);
    expect(started).toEqual(["a", "b"]);
    expect(h.log).toEqual(["b cancelled@10", "b cleaned@25", "caught@25"]);
    await h.expectClean();
  });

  it("cancelling the caller cancels the running items and starts no more", async () => {
    const h = createHarness();
    const { stats, fn } = tracked(h);
    const task = h.run(() => mapLimit([100, 100, 100, 100], 2, fn));
    h.clock.schedule(50, () => void task.cancel());

    await expect(task).rejects.toBeInstanceOf(TaskCancelledError);
    expect(stats).toEqual({ calls: 2, running: 0, maxRunning: 2 });
    expect(h.clock.now()).toBe(50);
    await h.expectClean();
  });
});

describe("forEachLimit", () => {
  it("runs the effects with at most limit at once and returns undefined", async () => {
    const h = createHarness();
    const { stats, fn } = tracked(h);
    const result = await h.run(() => forEachLimit([20, 10, 10, 10], 2, fn));

    expect(result).toBeUndefined();
    expect(stats).toEqual({ calls: 4, running: 0, maxRunning: 2 });
    expect(byInstant(h.log)).toEqual([
      new Set(["start 0@0", "start 1@0"]),
      new Set(["start 2@10"]),
      new Set(["start 3@20"]),
    ]);
    expect(h.clock.now()).toBe(30);
    await h.expectClean();
  });

  it("returns at once for an empty input, without calling fn", async () => {
    const h = createHarness();
    let calls = 0;
    const result = await h.run(() =>
      forEachLimit([], 1, function* never() {
        calls++;
      }),
    );

    expect(result).toBeUndefined();
    expect(calls).toBe(0);
    await h.expectClean();
  });

  it("throws the first failure after the running items' cleanup, with later errors suppressed", async () => {
    const h = createHarness();
    const first = new Error("x failed");
    const later = new Error("y cleanup failed");
    let caught: unknown;
    let calls = 0;
    await h.run(function* caller() {
      try {
        yield* forEachLimit(["x", "y", "z"], 2, function* item(name) {
          calls++;
          if (name === "x") {
            yield* sleep(5);
            throw first;
          }
          try {
            yield* sleep(100);
          } finally {
            yield* sleep(20);
            // biome-ignore lint/correctness/noUnsafeFinally: the case is a cleanup that throws.
            if (name === "y") throw later;
          }
        });
      } catch (e) {
        caught = e;
        h.mark("caught");
      }
    });

    expect(caught).toBe(first);
    expect((caught as { suppressed?: unknown[] }).suppressed).toEqual([later]);
    expect(calls).toBe(2);
    expect(h.log).toEqual(["caught@25"]);
    await h.expectClean();
  });
});

describe("bad input to mapLimit and forEachLimit", () => {
  const fn = function* noop() {};
  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "2"])(
    "limit %s is a RangeError naming limit, at the call",
    (limit) => {
      for (const make of [
        () => mapLimit([1], limit as number, fn),
        () => forEachLimit([1], limit as number, fn),
      ]) {
        expect(make).toThrow(RangeError);
        expect(make).toThrow(/limit/);
        expect(make).toThrow(expect.objectContaining({ code: "KEEL_INVALID_ARGUMENT" }));
      }
    },
  );

  it.each([null, undefined, 42, {}])("items %s is a TypeError naming items", (items) => {
    for (const make of [() => mapLimit(items as never, 1, fn), () => forEachLimit(items as never, 1, fn)]) {
      expect(make).toThrow(TypeError);
      expect(make).toThrow(/items/);
    }
  });

  it("a fn that is not a function is a TypeError naming fn", () => {
    for (const make of [() => mapLimit([1], 1, 3 as never), () => forEachLimit([1], 1, 3 as never)]) {
      expect(make).toThrow(TypeError);
      expect(make).toThrow(/fn/);
    }
  });
});

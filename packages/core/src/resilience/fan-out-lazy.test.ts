/**
 * The fan-out reads its items lazily: an endless or async source, at most `limit` pulled ahead, the
 * source closed when the fan-out ends early, and the settled form.
 */
import {
  forEachLimit,
  isCancelled,
  mapLimit,
  mapLimitSettled,
  type Operation,
  sleep,
  TaskCancelledError,
  TimeoutError,
  timeout,
} from "@keel/core";
import { createHarness } from "@keel/testing";
import { describe, expect, it } from "vitest";

/** 0, 1, 2, … forever, logging when it is closed. */
function* naturals(log: string[]): Generator<number> {
  try {
    for (let n = 0; ; n++) yield n;
  } finally {
    log.push("source closed");
  }
}

function* work(ms: number): Operation<void> {
  yield* sleep(ms);
}

describe("the fan-out pulls its items lazily", () => {
  it("an endless source under a timeout: items start as workers free up, and the timeout ends it", async () => {
    const h = createHarness();
    const log: string[] = [];
    let started = 0;
    const task = h.run(() =>
      timeout(
        100,
        forEachLimit(naturals(log), 4, function* item() {
          started++;
          yield* work(10);
        }),
      ),
    );

    await expect(task).rejects.toBeInstanceOf(TimeoutError);
    expect(started).toBe(40);
    expect(log).toEqual(["source closed"]);
    expect(h.clock.now()).toBe(100);
    await h.expectClean();
  });

  it("pulls at most limit items ahead of the ones finished", async () => {
    const h = createHarness();
    let pulled = 0;
    let finished = 0;
    let maxAhead = 0;
    function* counted(): Generator<number> {
      for (let n = 0; n < 50; n++) {
        pulled++;
        maxAhead = Math.max(maxAhead, pulled - finished);
        yield n;
      }
    }
    const results = await h.run(() =>
      mapLimit(counted(), 3, function* item(n) {
        yield* sleep(n % 7);
        finished++;
        return n;
      }),
    );

    expect(results).toEqual(Array.from({ length: 50 }, (_, n) => n));
    expect(maxAhead).toBe(3);
    await h.expectClean();
  });

  it("reads an async generator, with results in input order", async () => {
    const h = createHarness();
    async function* pages(): AsyncGenerator<string> {
      for (let p = 1; p <= 5; p++) {
        await Promise.resolve();
        yield `page ${p}`;
      }
    }
    const results = await h.run(() =>
      mapLimit(pages(), 2, function* fetchPage(page, index) {
        yield* sleep(10 * (5 - index));
        return `${page} (#${index})`;
      }),
    );

    expect(results).toEqual(["page 1 (#0)", "page 2 (#1)", "page 3 (#2)", "page 4 (#3)", "page 5 (#4)"]);
    await h.expectClean();
  });

  it("calls a hand-written async iterator's next() one at a time, in pull order", async () => {
    const h = createHarness();
    let calling = 0;
    let overlaps = 0;
    let n = 0;
    const cursor: AsyncIterable<number> = {
      [Symbol.asyncIterator]: () => ({
        async next(): Promise<IteratorResult<number>> {
          if (++calling > 1) overlaps++;
          await new Promise((resolve) => setImmediate(resolve));
          calling--;
          return n < 6 ? { done: false, value: n++ } : { done: true, value: undefined };
        },
      }),
    };
    const results = await h.run(() =>
      mapLimit(cursor, 3, function* item(v, i) {
        return `${i}:${v}`;
      }),
    );

    expect(results).toEqual(["0:0", "1:1", "2:2", "3:3", "4:4", "5:5"]);
    expect(overlaps).toBe(0);
    await h.expectClean();
  });

  it("an async source that is endless stops at the timeout, and its finally runs before the timeout throws", async () => {
    const h = createHarness();
    const log: string[] = [];
    async function* ticks(): AsyncGenerator<number> {
      try {
        for (let n = 0; ; n++) yield n;
      } finally {
        log.push("source closed");
      }
    }
    let started = 0;
    const task = h.run(function* caller() {
      try {
        yield* timeout(
          50,
          forEachLimit(ticks(), 2, function* item() {
            started++;
            yield* sleep(10);
          }),
        );
      } catch (e) {
        log.push(`caught ${(e as Error).name}`);
      }
    });

    await task;
    expect(started).toBe(10);
    expect(log).toEqual(["source closed", "caught TimeoutError"]);
    await h.expectClean();
  });

  it("a wait for a source that never answers is cancelled at once, and the close does not wait for it", async () => {
    const h = createHarness();
    const calls: string[] = [];
    const stuck: AsyncIterable<number> = {
      [Symbol.asyncIterator]: () => ({
        next: () => {
          calls.push("next");
          return new Promise<IteratorResult<number>>(() => {});
        },
        return: () => {
          calls.push("return");
          return Promise.resolve({ done: true, value: undefined });
        },
      }),
    };
    const task = h.run(() => timeout(30, mapLimit(stuck, 3, work.bind(null, 1))));

    await expect(task).rejects.toBeInstanceOf(TimeoutError);
    expect(h.clock.now()).toBe(30);
    expect(calls).toEqual(["next"]); // one next() at a time; return() waits for it to settle
    await h.expectClean();
  });
});

describe("a fan-out that ends early closes its source", () => {
  it("an item's failure cancels the others, waits for their cleanup, and closes the source", async () => {
    const h = createHarness();
    const log: string[] = [];
    const boom = new Error("item 1 failed");
    let caught: unknown;
    await h.run(function* caller() {
      try {
        yield* mapLimit(naturals(log), 2, function* item(n) {
          try {
            yield* sleep(n === 1 ? 5 : 100);
            if (n === 1) throw boom;
          } finally {
            if (n !== 1) log.push(`item ${n} cleaned up`);
          }
        });
      } catch (e) {
        caught = e;
      }
    });

    expect(caught).toBe(boom);
    expect(log).toEqual(["item 0 cleaned up", "source closed"]);
    await h.expectClean();
  });

  it("an error thrown by the source fails the fan-out after the running items' cleanup, and the source is not closed", async () => {
    const h = createHarness();
    const log: string[] = [];
    const broken = new Error("the source broke");
    function* failing(): Generator<number> {
      try {
        yield 1;
        yield 2;
        throw broken;
      } finally {
        log.push("source finally");
      }
    }
    let returns = 0;
    const source: Iterable<number> = {
      [Symbol.iterator]() {
        const it = failing();
        return {
          next: () => it.next(),
          return: (v?: unknown) => {
            returns++;
            return it.return(v as number);
          },
        };
      },
    };
    const task = h.run(() =>
      forEachLimit(source, 2, function* item(n) {
        try {
          yield* sleep(10);
        } catch (e) {
          if (isCancelled(e)) log.push(`item ${n} cancelled`);
          throw e;
        }
      }),
    );

    await expect(task).rejects.toBe(broken);
    expect(log).toEqual(["source finally", "item 2 cancelled"]);
    expect(returns).toBe(0);
    await h.expectClean();
  });

  it("an async source that rejects fails the fan-out with its error", async () => {
    const h = createHarness();
    const broken = new Error("page 2 failed");
    async function* pages(): AsyncGenerator<number> {
      yield 1;
      throw broken;
    }
    const task = h.run(() => mapLimit(pages(), 2, work.bind(null, 5)));
    await expect(task).rejects.toBe(broken);
    await h.expectClean();
  });

  it("an error from the source's return() joins the item's error as suppressed", async () => {
    const h = createHarness();
    const boom = new Error("item failed");
    const closeError = new Error("close failed");
    function* source(): Generator<number> {
      try {
        for (let n = 0; ; n++) yield n;
      } finally {
        // biome-ignore lint/correctness/noUnsafeFinally: the case is a source whose close throws.
        throw closeError;
      }
    }
    const task = h.run(() =>
      mapLimit(source(), 2, function* item(n) {
        yield* sleep(1);
        if (n === 1) throw boom;
      }),
    );

    await expect(task).rejects.toBe(boom);
    expect((boom as { suppressed?: unknown[] }).suppressed).toEqual([closeError]);
    expect(h.eventsOf("error:suppressed").map((e) => e.error)).toEqual([closeError]);
    await h.expectClean();
  });

  it("cancelling the caller closes the source after the items' cleanup", async () => {
    const h = createHarness();
    const log: string[] = [];
    const task = h.run(() =>
      forEachLimit(naturals(log), 3, function* item(n) {
        try {
          yield* sleep(100);
        } finally {
          log.push(`item ${n} cleaned up`);
        }
      }),
    );
    h.clock.schedule(50, () => void task.cancel());

    await expect(task).rejects.toBeInstanceOf(TaskCancelledError);
    expect(log).toEqual(["item 0 cleaned up", "item 1 cleaned up", "item 2 cleaned up", "source closed"]);
    await h.expectClean();
  });

  it("runs again over the same array (the iterator is opened per run)", async () => {
    const h = createHarness();
    const op = mapLimit([1, 2, 3], 2, function* double(n) {
      return n * 2;
    });
    expect(await h.run(() => op)).toEqual([2, 4, 6]);
    expect(await h.run(() => op)).toEqual([2, 4, 6]);
    await h.expectClean();
  });
});

describe("mapLimitSettled", () => {
  it("collects every outcome in input order; a failure stops nothing", async () => {
    const h = createHarness();
    const results = await h.run(() =>
      mapLimitSettled([30, 10, 20, 5], 2, function* item(ms, i) {
        yield* sleep(ms);
        if (i % 2 === 1) throw new Error(`item ${i} failed`);
        return ms;
      }),
    );

    expect(results).toEqual([
      { status: "fulfilled", value: 30 },
      { status: "rejected", reason: new Error("item 1 failed") },
      { status: "fulfilled", value: 20 },
      { status: "rejected", reason: new Error("item 3 failed") },
    ]);
    expect(h.clock.now()).toBe(35);
    await h.expectClean();
  });

  it("collects an item's own timeout as a rejection", async () => {
    const h = createHarness();
    const results = await h.run(() =>
      mapLimitSettled([5, 50], 2, function* item(ms) {
        yield* timeout(20, sleep(ms));
        return ms;
      }),
    );
    expect(results[0]).toEqual({ status: "fulfilled", value: 5 });
    expect(results[1]?.status === "rejected" && results[1].reason).toBeInstanceOf(TimeoutError);
    await h.expectClean();
  });

  it("never collects a cancellation: cancelling the caller ends it, and no more items start", async () => {
    const h = createHarness();
    let started = 0;
    const task = h.run(() =>
      mapLimitSettled([100, 100, 100, 100], 2, function* item(ms) {
        started++;
        yield* sleep(ms);
      }),
    );
    h.clock.schedule(50, () => void task.cancel());

    await expect(task).rejects.toBeInstanceOf(TaskCancelledError);
    expect(started).toBe(2);
    await h.expectClean();
  });

  it("an error thrown by an item's finally during cancellation is the outcome, not a result", async () => {
    const h = createHarness();
    const closeError = new Error("close failed");
    let started = 0;
    const task = h.run(() =>
      mapLimitSettled([1, 2, 3], 1, function* item() {
        started++;
        try {
          yield* sleep(100);
        } finally {
          // biome-ignore lint/correctness/noUnsafeFinally: the case is a cleanup that throws.
          throw closeError;
        }
      }),
    );
    h.clock.schedule(50, () => void task.cancel());

    await expect(task).rejects.toBe(closeError);
    expect(started).toBe(1);
    await h.expectClean();
  });
});

describe("bad items", () => {
  it("names the rule: an iterable or an async iterable", () => {
    for (const make of [
      () => mapLimit({} as never, 1, work),
      () => mapLimitSettled(42 as never, 1, work),
      () => forEachLimit(null as never, 1, work),
    ]) {
      expect(make).toThrow(TypeError);
      expect(make).toThrow(/\(items\): expected an iterable or an async iterable/);
    }
  });
});

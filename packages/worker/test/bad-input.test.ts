/**
 * Bad input: every option of the worker and the queue is checked at the call, with a typed error
 * whose message names it; a handler that is not an operation is refused at `useWorker`.
 */
import { constant, emitEvent, type PackageEventInput, run, sleep, until } from "@keel/core";
import { createHarness } from "@keel/testing";
import { createMemoryQueue, type Queue, useWorker, type WorkerOptions } from "@keel/worker";
import { useBullQueue } from "@keel/worker/bullmq";
import { describe, expect, it } from "vitest";

async function withQueue<R>(body: (queue: Queue<string>) => Generator<unknown, R, unknown>): Promise<R> {
  const h = createHarness();
  const value = await h.run(function* () {
    return yield* body(yield* createMemoryQueue<string>({ name: "bad" }));
  });
  await h.expectClean();
  return value;
}

function* noop() {}

describe("useWorker refuses bad options, naming each", () => {
  const cases: [string, unknown, ErrorConstructor, RegExp][] = [
    [
      "concurrency 0",
      { concurrency: 0 },
      RangeError,
      /\{ concurrency \}: expected a whole number ≥ 1, got 0/,
    ],
    ["concurrency 1.5", { concurrency: 1.5 }, RangeError, /\{ concurrency \}/],
    ["concurrency string", { concurrency: "2" }, RangeError, /\{ concurrency \}.*got "2"/],
    [
      "timeoutMs Infinity",
      { timeoutMs: Infinity },
      RangeError,
      /\{ timeoutMs \}: expected a finite number > 0/,
    ],
    ["timeoutMs 0", { timeoutMs: 0 }, RangeError, /\{ timeoutMs \}/],
    ["retry not an object", { retry: 3 }, TypeError, /\{ retry \}: expected an object, got 3/],
    [
      "retry unknown key",
      { retry: { perAttemptMs: 5 } },
      TypeError,
      /retry \{ perAttemptMs \}: expected one of the known options/,
    ],
    [
      "retry.attempts 0",
      { retry: { attempts: 0 } },
      RangeError,
      /\{ retry\.attempts \}: expected a whole number ≥ 1/,
    ],
    ["retry.backoff", { retry: { backoff: 100 } }, TypeError, /\{ retry\.backoff \}: expected a Backoff/],
    ["retry.retryOn", { retry: { retryOn: true } }, TypeError, /\{ retry\.retryOn \}: expected a function/],
    ["retry.budgetMs", { retry: { budgetMs: -1 } }, RangeError, /\{ retry\.budgetMs \}/],
    ["stallMs 0", { stallMs: 0 }, RangeError, /\{ stallMs \}: expected a number > 0/],
    ["drainMs Infinity", { drainMs: Infinity }, RangeError, /\{ drainMs \}: expected a finite number ≥ 0/],
    ["drainMs NaN", { drainMs: Number.NaN }, RangeError, /\{ drainMs \}/],
    ["cleanupBudgetMs", { cleanupBudgetMs: -5 }, RangeError, /\{ cleanupBudgetMs \}/],
    ["closeCapMs", { closeCapMs: Infinity }, RangeError, /\{ closeCapMs \}/],
    ["deadLetter", { deadLetter: "dlq" }, TypeError, /\{ deadLetter \}: expected a function/],
    ["onShutdown", { onShutdown: {} }, TypeError, /\{ onShutdown \}: expected a function/],
    [
      "an unknown option",
      { concurency: 2 },
      TypeError,
      /options\) \{ concurency \}: expected one of the known options/,
    ],
    ["options not an object", 5, TypeError, /options: expected an object, got 5/],
  ];
  for (const [what, options, type, message] of cases) {
    it(`${what}`, async () => {
      await withQueue(function* (queue) {
        let thrown: unknown;
        try {
          useWorker(queue, noop, options as WorkerOptions<string>);
        } catch (e) {
          thrown = e;
        }
        expect(thrown).toBeInstanceOf(type);
        expect((thrown as Error).message).toMatch(message);
        expect((thrown as { code?: string }).code).toBe("KEEL_INVALID_ARGUMENT");
      });
    });
  }
});

describe("useWorker refuses a handler that is not an operation", () => {
  it("not a function", async () => {
    await withQueue(function* (queue) {
      expect(() => useWorker(queue, "handle" as never)).toThrow(
        /useWorker\(queue, handler\): expected a function returning an operation/,
      );
    });
  });

  it("an async function, with the fix in the message", async () => {
    await withQueue(function* (queue) {
      expect(() => useWorker(queue, (async () => {}) as never)).toThrow(TypeError);
      expect(() => useWorker(queue, (async () => {}) as never)).toThrow(/wrap promise code with until\(\)/);
    });
  });

  it("a function whose result is not an operation: the job is rejected with a TypeError naming the handler", async () => {
    const dead = await withQueue(function* (queue) {
      yield* useWorker(queue, (() => Promise.resolve()) as never, { retry: { backoff: constant(0) } });
      yield* queue.add("x", { id: "a" });
      while ((yield* queue.counts()).deadLettered < 1) yield* sleep(1);
      return yield* queue.deadLetters();
    });
    expect(dead[0]!.reason).toBe("rejected");
    expect(dead[0]!.error).toBeInstanceOf(TypeError);
    expect((dead[0]!.error as Error).message).toMatch(
      /handler\(job\) for bad\/a: expected an operation, got a promise|expected an operation/,
    );
  });

  it("not a queue", () => {
    expect(() => useWorker({} as never, noop)).toThrow(/useWorker\(queue\): expected a queue/);
  });

  it("a promise handler wrapped with until() is fine", async () => {
    const done = await withQueue(function* (queue) {
      const worker = yield* useWorker(queue, () => until(Promise.resolve(1)));
      yield* queue.add("x");
      while ((yield* worker.stats()).completed < 1) yield* sleep(1);
      return (yield* worker.stats()).completed;
    });
    expect(done).toBe(1);
  });
});

describe("the queue refuses bad input, naming it", () => {
  it("createMemoryQueue: name, capacity and deadLetterLimit", () => {
    expect(() => createMemoryQueue({} as never)).toThrow(
      /createMemoryQueue\(\{ name \}\): expected a non-empty string/,
    );
    expect(() => createMemoryQueue({ name: "q", capacity: 0 })).toThrow(RangeError);
    expect(() => createMemoryQueue({ name: "q", capacity: 0 })).toThrow(
      /\{ capacity \}\): expected a whole number ≥ 1, got 0/,
    );
    for (const deadLetterLimit of [-1, 1.5, "10"])
      expect(() => createMemoryQueue({ name: "q", deadLetterLimit: deadLetterLimit as never })).toThrow(
        /createMemoryQueue\(\{ deadLetterLimit \}\): expected a whole number ≥ 0/,
      );
    expect(() => createMemoryQueue({ name: "q", size: 3 } as never)).toThrow(
      /\{ size \}: expected one of the known options/,
    );
  });

  const cases: [string, unknown, RegExp][] = [
    ["an empty id", { id: "" }, /\{ id \}: expected a non-empty string/],
    ["a numeric id", { id: 7 }, /\{ id \}: expected a non-empty string, got 7/],
    [
      "deadlineAt and ttlMs",
      { deadlineAt: 5, ttlMs: 5 },
      /\{ deadlineAt, ttlMs \}: expected one of deadlineAt or ttlMs, not both/,
    ],
    ["deadlineAt NaN", { deadlineAt: Number.NaN }, /\{ deadlineAt \}/],
    ["ttlMs negative", { ttlMs: -1 }, /\{ ttlMs \}/],
    ["attempts 0", { attempts: 0 }, /\{ attempts \}: expected a whole number ≥ 1/],
    ["priority -1", { priority: -1 }, /\{ priority \}: expected a whole number ≥ 0/],
    ["delayMs Infinity", { delayMs: Infinity }, /\{ delayMs \}: expected a finite number ≥ 0/],
    ["an unknown option", { ttl: 5 }, /\{ ttl \}: expected one of the known options/],
  ];
  for (const [what, options, message] of cases) {
    it(`add: ${what}, with nothing added`, async () => {
      const counts = await withQueue(function* (queue) {
        expect(() => queue.add("x", options as never)).toThrow(message);
        return yield* queue.counts();
      });
      expect(counts.waiting + counts.delayed).toBe(0);
    });
  }
});

describe("useBullQueue refuses a bad maxStalls at the call, naming it (no Redis needed)", () => {
  const connection = { host: "127.0.0.1", port: 6379 };
  for (const maxStalls of [-1, 1.5, Number.NaN, Infinity, "2", null]) {
    it(`maxStalls ${String(maxStalls)}`, () => {
      let thrown: unknown;
      try {
        useBullQueue({ name: "q", connection, maxStalls: maxStalls as never });
      } catch (e) {
        thrown = e;
      }
      expect(thrown).toBeInstanceOf(RangeError);
      expect((thrown as Error).message).toMatch(
        /^useBullQueue\(\{ maxStalls \}\): expected a whole number ≥ 0, got /,
      );
      expect((thrown as { code?: string }).code).toBe("KEEL_INVALID_ARGUMENT");
    });
  }

  it("maxStalls 0 (dead-letter at the first stall) is accepted", () => {
    expect(() => useBullQueue({ name: "q", connection, maxStalls: 0 })).not.toThrow();
  });

  it("BullMQ's own name for it, maxStalledCount, is refused as an unknown option listing maxStalls", () => {
    expect(() => useBullQueue({ name: "q", connection, maxStalledCount: 3 } as never)).toThrow(
      /useBullQueue\(options\) \{ maxStalledCount \}: expected one of the known options \(.*maxStalls.*\)/,
    );
  });
});

describe("emitEvent (core) takes only package event families", () => {
  it("refuses a kernel event type", async () => {
    expect(() => emitEvent({ type: "task:start" } as unknown as PackageEventInput)).toThrow(
      /emitEvent\(event\): expected an event of a package family \(worker:, workflow:\), got "task:start"/,
    );
    await run(function* () {
      yield* emitEvent({ type: "worker:job", queue: "q", jobId: "1", attempt: 1, transition: "start" });
    });
  });
});

describe("useBullQueue refuses a bad callTimeoutMs at the call, naming it (no Redis needed)", () => {
  const connection = { host: "127.0.0.1", port: 6379 };
  for (const callTimeoutMs of [0, -1, Number.NaN, "2", null]) {
    it(`callTimeoutMs ${String(callTimeoutMs)}`, () => {
      expect(() => useBullQueue({ name: "q", connection, callTimeoutMs: callTimeoutMs as never })).toThrow(
        /^useBullQueue\(\{ callTimeoutMs \}\): expected a number > 0 \(or Infinity\), got /,
      );
    });
  }

  it("callTimeoutMs Infinity (no bound) is accepted", () => {
    expect(() => useBullQueue({ name: "q", connection, callTimeoutMs: Infinity })).not.toThrow();
  });
});

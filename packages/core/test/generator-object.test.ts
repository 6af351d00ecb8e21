/**
 * A generator object (`work()` rather than `work`) is its own iterator, so it can run only once. Where
 * an operation runs more than once, the second run must fail loudly instead of resuming the exhausted
 * generator (which "completes" with `undefined`).
 */
import { type Operation, retry, run, sleep, spawn, timeout } from "@keel/core";
import { createHarness } from "@keel/testing";
import { describe, expect, it } from "vitest";

const alreadyRun = expect.objectContaining({
  name: "TypeError",
  code: "KEEL_INVALID_ARGUMENT",
  message: expect.stringMatching(/has already run.*pass the generator function itself/),
});

describe("a generator object runs once, and a second run says to pass a function", () => {
  it("spawning one generator object twice: the first gives its value, the second fails", async () => {
    const h = createHarness();
    function* seven() {
      yield* sleep(1);
      return 7;
    }
    const once = seven();
    const values: number[] = [];
    const parent = h.run(function* parent() {
      values.push(yield* yield* spawn(once));
      values.push(yield* yield* spawn(once));
    });
    // The second child fails, and a child's error fails its owner (semantics §2).
    await expect(parent).rejects.toEqual(alreadyRun);
    expect(values).toEqual([7]);
    await h.expectClean();
  });

  it("running one generator object as two roots: the second rejects", async () => {
    const h = createHarness();
    function* hello() {
      return "hello";
    }
    const gen = hello();
    expect(await h.run(gen)).toBe("hello");
    await expect(h.run(gen)).rejects.toEqual(alreadyRun);
    await h.expectClean();
  });

  it("one generator object under two timeouts: the second fails, also when the object is frozen", async () => {
    // The mark of a started generator is a property on it; a frozen one is remembered apart.
    for (const freeze of [false, true]) {
      const h = createHarness();
      function* work() {
        yield* sleep(1);
        return "done";
      }
      const gen = work();
      if (freeze) Object.freeze(gen);
      const values: string[] = [];
      const parent = h.run(function* parent() {
        values.push(yield* timeout(100, gen));
        values.push(yield* timeout(100, gen));
      });
      await expect(parent).rejects.toEqual(alreadyRun);
      expect(values).toEqual(["done"]);
      await h.expectClean();
    }
  });

  it("retry refuses a generator object at the call, and retries a generator function afresh", async () => {
    let calls = 0;
    function* flaky() {
      calls++;
      if (calls === 1) throw new Error("first attempt fails");
      return "ok";
    }
    expect(() => retry(flaky(), { attempts: 3, retryOn: () => true })).toThrow(
      expect.objectContaining({
        name: "TypeError",
        code: "KEEL_INVALID_ARGUMENT",
        message: expect.stringMatching(/^retry\(op\): .*got a generator object.*retry\(fetchOrder\)/),
      }),
    );
    const h = createHarness();
    expect(await h.run(() => retry(flaky, { attempts: 3, retryOn: () => true }))).toBe("ok");
    expect(calls).toBe(2);
    await h.expectClean();
  });

  it("re-runnable operations run as often as asked: hand-written ones and the kernel's own", async () => {
    const h = createHarness();
    const ready: Operation<string> = {
      *[Symbol.iterator]() {
        yield* sleep(5);
        return "ready";
      },
    };
    const nap = sleep(5);
    const values = await h.run(function* twice() {
      const a = yield* spawn(ready);
      const b = yield* spawn(ready);
      yield* nap;
      yield* nap;
      return [yield* a, yield* b, h.clock.now()];
    });
    expect(values).toEqual(["ready", "ready", 10]);
    await h.expectClean();
  });
});

describe("a generator object spawned once behaves as its function would", () => {
  it("runs to its value", async () => {
    function* work(n: number) {
      yield* sleep(n);
      return n * 2;
    }
    expect(await run(work(0))).toBe(0);
  });
});

/**
 * An operation awaited instead of run (`await sleep(200)` in async code) fails loudly with
 * `KEEL_OPERATION_AWAITED` and says what to write, where it used to resolve at once to the operation
 * itself, having waited 0 ms. `yield*` never reads `then`, so operations run as before; tasks and
 * `task.cancel()`'s result are promises and keep a promise's `then`. At the type level the same
 * `await` is a TypeScript error (TS1320), pinned with `@ts-expect-error` below.
 */
import {
  action,
  all,
  allSettled,
  call,
  cleanupBudget,
  createContext,
  createSemaphore,
  deadline,
  KeelError,
  mapLimit,
  now,
  type Operation,
  race,
  random,
  resource,
  retry,
  scoped,
  shield,
  sleep,
  spawn,
  suspend,
  timeout,
  timeoutAt,
  until,
  useAbortSignal,
  useScope,
  withCleanupBudget,
} from "@keel/core";
import { createHarness } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { awaitedError } from "./support/awaited.js";

/** What `await op` gave: the error it rejected with (the test fails if it resolved). */

const ctx = createContext("tenant", "none");
const made: Array<[string, () => Operation<unknown>]> = [
  ["sleep(200)", () => sleep(200)],
  ["timeout(…)", () => timeout(100, sleep(1))],
  ["timeout(…)", () => timeoutAt(100, sleep(1))],
  ["shield(…)", () => shield(sleep(1))],
  ["scoped(…)", () => scoped(sleep(1))],
  ["spawn(…)", () => spawn(sleep(1))],
  ["all(…)", () => all([sleep(1)])],
  ["all([])", () => all([])],
  ["all(…)", () => allSettled([sleep(1)])],
  ["race(…)", () => race([sleep(1)])],
  ["until(promise)", () => until(Promise.resolve(1))],
  ["action", () => action(() => () => {})],
  ["call(fetchIt)", () => call(function fetchIt() {})],
  ["suspend()", () => suspend()],
  ["now()", () => now()],
  ["deadline()", () => deadline()],
  ["random()", () => random()],
  ["cleanupBudget()", () => cleanupBudget()],
  ["context.with(…)", () => withCleanupBudget(10, sleep(1))],
  ["useAbortSignal()", () => useAbortSignal()],
  ["useScope()", () => useScope()],
  ["tenant.get()", () => ctx.get()],
  ["context.with(…)", () => ctx.with("a", sleep(1))],
  ["retry(…)", () => retry(sleep(1))],
  ["mapLimit(…)", () => mapLimit([1], 1, () => sleep(1))],
  ["semaphore.use(…)", () => createSemaphore(1).use(sleep(1))],
  [
    "resource(r)",
    () =>
      resource(function* r(provide) {
        yield* provide(1);
      }),
  ],
];

describe("await op: KEEL_OPERATION_AWAITED", () => {
  it("await sleep(200) rejects at once, says to write yield* or run(), and sleeps nothing", async () => {
    const e = await awaitedError(sleep(200));
    expect(e).toBeInstanceOf(KeelError);
    expect(e.code).toBe("KEEL_OPERATION_AWAITED");
    expect(e.message).toContain("sleep(200) is a Keel operation, not a promise");
    expect(e.message).toContain("`yield* op`");
    expect(e.message).toContain("`await run(() => op)`");
  });

  it.each(made)("every public factory's operation refuses await (%s)", async (label, make) => {
    const e = await awaitedError(make());
    expect(e.code).toBe("KEEL_OPERATION_AWAITED");
    expect(e.message.startsWith(label.startsWith("action") ? "action" : label)).toBe(true);
  });

  it("returning an operation from an async function, or resolving a promise with one, rejects too", async () => {
    const fromAsync = async () => sleep(5) as unknown as number;
    await expect(fromAsync()).rejects.toMatchObject({ code: "KEEL_OPERATION_AWAITED" });
    await expect(Promise.resolve(sleep(5))).rejects.toMatchObject({ code: "KEEL_OPERATION_AWAITED" });
  });

  it("the `then` is not enumerable: equality, spreading and JSON see the operation as before", () => {
    expect(Object.keys(all([]))).toEqual([]);
    expect(JSON.stringify(now())).toBe("{}");
  });

  it("yield* ignores then: the same operations run, through run() and in a generator", async () => {
    const h = createHarness();
    const op = sleep(200);
    await h.run(() => op);
    const values = await h.run(function* () {
      yield* op;
      const t = yield* spawn(function* () {
        return 1;
      });
      return [yield* t, yield* until(Promise.resolve(2)), yield* all([timeout(10, sleep(1))]), yield* now()];
    });
    expect(values).toEqual([1, 2, [undefined], 401]);
    await h.expectClean();
  });

  it("until(op) is refused at the call, naming the parameter and what it got; until(task) still waits", async () => {
    expect(() => until(sleep(1) as unknown as PromiseLike<void>)).toThrow(TypeError);
    expect(() => until(sleep(1) as unknown as PromiseLike<void>)).toThrow(/until\(promise\).*an operation/);
    const h = createHarness();
    const value = await h.run(function* () {
      const task = yield* spawn(function* () {
        yield* sleep(5);
        return "joined";
      });
      return yield* until(task);
    });
    expect(value).toBe("joined");
    await h.expectClean();
  });

  it("call(fn) whose fn returns an operation fails with the error, not a value", async () => {
    const h = createHarness();
    const task = h.run(() => call(() => sleep(5) as unknown as Promise<void>));
    await expect(task).rejects.toMatchObject({ code: "KEEL_OPERATION_AWAITED" });
  });

  it("yield without the star names an operation as an operation, not as a promise", async () => {
    const h = createHarness();
    const task = h.run(function* () {
      yield sleep(5);
    });
    const e = await task.catch((x: Error) => x);
    expect((e as KeelError).code).toBe("KEEL_NOT_AN_INSTRUCTION");
    expect((e as KeelError).message).toContain("an operation");
    expect((e as KeelError).message).not.toContain("until(promise)");
  });

  it("tasks and cancel()'s result stay promises: their then is a promise's", async () => {
    const h = createHarness();
    const task = h.run(function* () {
      yield* sleep(5);
      return 7;
    });
    expect(await task).toBe(7);
    await expect(Promise.resolve(task)).resolves.toBe(7);
    await expect(Promise.resolve(task.cancel())).resolves.toBeUndefined();
  });

  it("at the type level, await of a Keel operation is an error (TS1320), and run() is what typechecks", async () => {
    const h = createHarness();
    const wrong = async () => {
      // @ts-expect-error TS1320: an operation has a `then` that is not a promise's.
      await sleep(200);
    };
    await expect(wrong()).rejects.toMatchObject({ code: "KEEL_OPERATION_AWAITED" });
    const right: Promise<void> = h.run(() => sleep(200));
    await right;
    expect(h.clock.now()).toBe(200);
  });
});

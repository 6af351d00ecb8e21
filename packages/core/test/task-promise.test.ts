/**
 * A task is a promise for promise code (`then`, `catch`, `finally`, assignable to `Promise<T>`), and
 * `run(op, { signal })` lets an `AbortSignal` cancel a root, as promise libraries accept one.
 */
import { getEventListeners } from "node:events";
import { sleep, suspend, type Task, TaskCancelledError } from "@keel/core";
import { createHarness } from "@keel/testing";
import { afterEach, beforeEach, describe, expect, expectTypeOf, it } from "vitest";

const unhandled: unknown[] = [];
const onUnhandled = (e: unknown) => unhandled.push(e);
beforeEach(() => {
  unhandled.length = 0;
  process.on("unhandledRejection", onUnhandled);
});
afterEach(async () => {
  await new Promise((r) => setImmediate(r));
  process.off("unhandledRejection", onUnhandled);
  expect(unhandled).toEqual([]);
});

function* seven() {
  yield* sleep(10);
  return 7;
}

function* broken(): Generator<never, never> {
  throw new Error("broken");
}

describe("a task is a promise", () => {
  it("catch catches the task's error, and passes a value through", async () => {
    const h = createHarness();
    expect(await h.run(broken).catch((e: Error) => `caught ${e.message}`)).toBe("caught broken");
    expect(await h.run(seven).catch(() => 0)).toBe(7);
    await h.expectClean();
  });

  it("finally runs on either outcome and hands the outcome on", async () => {
    const h = createHarness();
    const ran: string[] = [];
    expect(await h.run(seven).finally(() => ran.push("after value"))).toBe(7);
    await expect(h.run(broken).finally(() => ran.push("after error"))).rejects.toThrow("broken");
    expect(ran).toEqual(["after value", "after error"]);
    await h.expectClean();
  });

  it("is assignable to Promise<T>, tagged Task, and adopted by Promise.resolve and Promise.all", async () => {
    const h = createHarness();
    const task = h.run(seven);
    const asPromise: Promise<number> = task;
    expectTypeOf(task).toMatchTypeOf<Promise<number>>();
    expect(Object.prototype.toString.call(task)).toBe("[object Task]");
    expect(await Promise.all([asPromise, Promise.resolve(task), h.run(seven)])).toEqual([7, 7, 7]);
    await h.expectClean();
  });

  it("a cancelled task rejects catch's handler with TaskCancelledError", async () => {
    const h = createHarness();
    const task: Task<never> = h.run(suspend);
    task.cancel("stop");
    const e = await task.catch((error: unknown) => error);
    expect(e).toBeInstanceOf(TaskCancelledError);
    expect((e as TaskCancelledError).reason).toMatchObject({ kind: "cancel", message: "stop" });
  });
});

describe("run(op, { signal })", () => {
  it("aborting the signal cancels the root with reason cancel and the signal's reason as its message", async () => {
    const h = createHarness();
    const controller = new AbortController();
    const cleanedAt: number[] = [];
    const task = h.run(
      function* worker() {
        try {
          yield* suspend();
        } finally {
          yield* sleep(20);
          cleanedAt.push(h.clock.now());
        }
      },
      { signal: controller.signal },
    );
    h.clock.schedule(100, () => controller.abort("shutting down"));
    const e = await task.catch((error: unknown) => error);
    expect(e).toBeInstanceOf(TaskCancelledError);
    expect((e as TaskCancelledError).reason).toMatchObject({
      kind: "cancel",
      at: 100,
      message: "shutting down",
    });
    expect(cleanedAt).toEqual([120]);
    expect(h.eventsOf("cancel:request").map((r) => r.reason.message)).toEqual(["shutting down"]);
    await h.expectClean();
  });

  it("a reason that is not a string is described in the message", async () => {
    const h = createHarness();
    const controller = new AbortController();
    const task = h.run(suspend, { signal: controller.signal });
    h.clock.schedule(5, () => controller.abort());
    const e = (await task.catch((error: unknown) => error)) as TaskCancelledError;
    expect(e.reason.message).toBe("aborted: AbortError: This operation was aborted");
    await h.expectClean();
  });

  it("an already-aborted signal cancels the task before its first turn: none of its code runs", async () => {
    const h = createHarness();
    let ran = false;
    const task = h.run(
      function* never() {
        ran = true;
      },
      { signal: AbortSignal.abort("too late") },
    );
    const e = (await task.catch((error: unknown) => error)) as TaskCancelledError;
    expect(e).toBeInstanceOf(TaskCancelledError);
    expect(e.reason).toMatchObject({ kind: "cancel", message: "too late" });
    expect(ran).toBe(false);
    await h.expectClean();
  });

  it("the task lets go of the signal when it settles, and a later abort does nothing", async () => {
    const h = createHarness();
    const controller = new AbortController();
    const task = h.run(seven, { signal: controller.signal });
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(1);
    expect(await task).toBe(7);
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
    controller.abort("after the fact");
    expect(task.state).toBe("completed");
    await h.expectClean();
  });
});

describe("task.cancel(message)", () => {
  it("refuses a message that is not a string at the call, and cancels nothing", async () => {
    const h = createHarness();
    const task = h.run(seven);
    expect(() => task.cancel(Symbol("why") as never)).toThrow(
      expect.objectContaining({
        name: "TypeError",
        code: "KEEL_INVALID_ARGUMENT",
        message: "task.cancel(message): expected a string or undefined, got Symbol(why)",
      }),
    );
    expect(() => task.cancel(42 as never)).toThrow(TypeError);
    expect(await task).toBe(7);
    await h.expectClean();
  });
});

describe("task.cancel() is a real promise and an operation", () => {
  it("has then, catch and finally, is instanceof Promise, and fulfills once the task has unwound", async () => {
    const h = createHarness();
    const task = h.run(function* worker() {
      try {
        yield* suspend();
      } finally {
        yield* sleep(20);
      }
    });
    await new Promise((r) => setImmediate(r));
    const stopped = task.cancel("enough");
    expect(stopped).toBeInstanceOf(Promise);
    expect(typeof stopped.catch).toBe("function");
    const order: string[] = [];
    const caught = stopped.catch(() => order.push("never rejects"));
    await stopped.finally(() => order.push(`finally ${task.state} @${h.clock.now()}`));
    await caught;
    expect(order).toEqual(["finally cancelled @20"]);
    expectTypeOf(stopped).toMatchTypeOf<Promise<void>>();
    await h.expectClean();
  });

  it("yield* task.cancel() waits for the task inside a generator, as before", async () => {
    const h = createHarness();
    const worker = h.run(function* worker() {
      try {
        yield* suspend();
      } finally {
        yield* sleep(20);
      }
    });
    const at = await h.run(function* boss() {
      yield* sleep(10);
      yield* worker.cancel();
      return h.clock.now();
    });
    expect(at).toBe(30);
    expect(worker.state).toBe("cancelled");
    await h.expectClean();
  });

  it("cancelling a settled task returns a promise that is already fulfilled; cancel is idempotent", async () => {
    const h = createHarness();
    const task = h.run(seven);
    expect(await task).toBe(7);
    await expect(task.cancel()).resolves.toBeUndefined();
    expect(task.state).toBe("completed");
  });

  it("a task itself is instanceof Promise, with a promise's then, catch and finally", async () => {
    const h = createHarness();
    const task = h.run(seven);
    expect(task).toBeInstanceOf(Promise);
    expect(Object.prototype.toString.call(task)).toBe("[object Task]");
    expect(await task.finally(() => {})).toBe(7);
    await h.expectClean();
  });
});

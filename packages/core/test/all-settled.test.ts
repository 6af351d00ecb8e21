/** `allSettled`: every outcome collected, a cancellation never. */
import {
  allSettled,
  isCancelled,
  run,
  sleep,
  spawn,
  suspend,
  TaskCancelledError,
  TimeoutError,
  timeout,
} from "@keel/core";
import { createHarness } from "@keel/testing";
import { describe, expect, it } from "vitest";

describe("allSettled", () => {
  it("collects values and errors in input order; a failure cancels nothing", async () => {
    const h = createHarness();
    const broken = new Error("b is down");
    const results = await h.run(() =>
      allSettled([
        function* a() {
          yield* sleep(30);
          h.mark("a done");
          return "a";
        },
        function* b(): Generator<unknown, number> {
          yield* sleep(10);
          throw broken;
        },
        function* c() {
          yield* sleep(20);
          h.mark("c done");
          return 3;
        },
      ]),
    );

    expect(results).toEqual([
      { status: "fulfilled", value: "a" },
      { status: "rejected", reason: broken },
      { status: "fulfilled", value: 3 },
    ]);
    expect(h.log).toEqual(["c done@20", "a done@30"]);
    await h.expectClean();
  });

  it("returns [] at once for no operations", async () => {
    const h = createHarness();
    expect(await h.run(() => allSettled([]))).toEqual([]);
    await h.expectClean();
  });

  it("collects a child's own timeout, and an enclosing timeout ends it as the enclosing scope's TimeoutError", async () => {
    const h = createHarness();
    const inner = await h.run(() => allSettled([() => timeout(10, sleep(50)), () => sleep(20)]));
    expect(inner[0].status === "rejected" && inner[0].reason).toBeInstanceOf(TimeoutError);
    expect(inner[1]).toEqual({ status: "fulfilled", value: undefined });

    const outer = h.run(() => timeout(15, allSettled([() => sleep(10), () => sleep(50)])));
    const error = await outer.then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TimeoutError);
    expect((error as TimeoutError).timeoutMs).toBe(15);
    await h.expectClean();
  });

  it("never collects a cancellation: the caller's catch sees Cancelled after every child's cleanup", async () => {
    const h = createHarness();
    const task = h.run(function* caller() {
      try {
        yield* allSettled([
          function* slow() {
            try {
              yield* sleep(100);
            } finally {
              yield* sleep(5);
              h.mark("slow cleaned up");
            }
          },
          function* failsFirst(): Generator<unknown, void> {
            yield* sleep(1);
            throw new Error("collected");
          },
        ]);
      } catch (e) {
        h.mark(isCancelled(e) ? "caller sees Cancelled" : `caller sees ${String(e)}`);
        throw e;
      }
    });
    h.clock.schedule(50, () => void task.cancel());

    await expect(task).rejects.toBeInstanceOf(TaskCancelledError);
    expect(h.log).toEqual(["slow cleaned up@55", "caller sees Cancelled@55"]);
    await h.expectClean();
  });

  it("an error thrown by a child's finally during the cancellation is the outcome, not a result", async () => {
    const h = createHarness();
    const closeError = new Error("close failed");
    const task = h.run(() =>
      allSettled([
        function* closing() {
          try {
            yield* suspend();
          } finally {
            // biome-ignore lint/correctness/noUnsafeFinally: the case is a cleanup that throws.
            throw closeError;
          }
        },
      ]),
    );
    h.clock.schedule(10, () => void task.cancel());

    await expect(task).rejects.toBe(closeError);
    await h.expectClean();
  });

  it("collects the TaskCancelledError of a child that joined another cancelled task", async () => {
    const results = await run(() =>
      allSettled([
        function* joinsCancelled() {
          const other = yield* spawn(suspend);
          yield* other.cancel();
          yield* other;
        },
      ]),
    );
    expect(results[0].status === "rejected" && results[0].reason).toBeInstanceOf(TaskCancelledError);
  });

  it("rejects anything but an array of operations, naming allSettled(ops)", () => {
    expect(() => allSettled("abc" as never)).toThrow(TypeError);
    expect(() => allSettled("abc" as never)).toThrow(/allSettled\(ops\)/);
    expect(() => allSettled([42] as never)).toThrow(/allSettled\(ops\[0\]\)/);
  });
});

import {
  all,
  call,
  createContext,
  race,
  run,
  scoped,
  shield,
  sleep,
  spawn,
  timeout,
  timeoutAt,
  until,
  useScope,
  withCleanupBudget,
} from "@keel/core";
import { createHarness, createVirtualClock } from "@keel/testing";
import { describe, expect, it } from "vitest";

const op = function* op() {
  return 1;
};

describe("bad input is rejected at the call, naming the parameter and the rule", () => {
  it.each([
    ["timeout(-1)", () => timeout(-1, op), /timeout\(ms\): expected a number ≥ 0.*got -1/],
    ["timeout(NaN)", () => timeout(Number.NaN, op), /timeout\(ms\).*got NaN/],
    ["timeoutAt(NaN)", () => timeoutAt(Number.NaN, op), /timeoutAt\(at\).*got NaN/],
    ["sleep(-1)", () => sleep(-1), /sleep\(ms\).*got -1/],
    ["withCleanupBudget(NaN)", () => withCleanupBudget(Number.NaN, op), /withCleanupBudget\(ms\).*got NaN/],
    ["shield limitMs -5", () => shield(op, { limitMs: -5 }), /limitMs.*got -5/],
    ["shield limitMs Infinity", () => shield(op, { limitMs: Infinity }), /limitMs.*finite.*got Infinity/],
    ["race([])", () => race([]), /race\(ops\): expected at least one operation/],
    ["run budget", () => run(op, { cleanupBudgetMs: -1 }), /cleanupBudgetMs.*got -1/],
  ])("%s is a RangeError", (_name, make, message) => {
    expect(make).toThrow(RangeError);
    expect(make).toThrow(message);
  });

  it.each([
    ["timeout(100, 42)", () => timeout(100, 42 as never), /timeout\(ms, op\): expected an operation.*got 42/],
    ["spawn('x')", () => spawn("x" as never), /spawn\(op\).*got "x"/],
    ["scoped(null)", () => scoped(null as never), /scoped\(op\).*got null/],
    ["all(ops[1])", () => all([op, 5 as never]), /all\(ops\[1\]\).*got 5/],
    ["run(promise)", () => run(Promise.resolve(1) as never), /run\(op\).*until\(promise\)/],
    ["until(3)", () => until(3 as never), /until\(promise\)/],
    ["call(1)", () => call(1 as never), /call\(fn\)/],
    ["context.with(v, 1)", () => createContext("c").with(1, 1 as never), /op/],
  ])("%s is a TypeError", (_name, make, message) => {
    expect(make).toThrow(TypeError);
    expect(make).toThrow(message);
  });

  it("a function that returns a non-operation fails the task with a TypeError and runs nothing else", async () => {
    const h = createHarness();
    await expect(h.run((() => 42) as never)).rejects.toThrow(TypeError);
    await h.expectClean();
  });

  it("spawning into a scope that has finished throws KEEL_SCOPE_CLOSED and never runs the op", async () => {
    const clock = createVirtualClock();
    let ran = false;
    const scope = await run(useScope, { clock });
    expect(scope.closed).toBe(true);
    expect(() =>
      scope.spawn(function* late() {
        ran = true;
      }),
    ).toThrow(expect.objectContaining({ code: "KEEL_SCOPE_CLOSED" }));
    await new Promise((r) => setImmediate(r));
    expect(ran).toBe(false);
  });

  it("an operation driven by hand outside any task throws KEEL_NO_TASK", () => {
    const it = spawn(op)[Symbol.iterator]();
    it.next();
    expect(() => it.next(undefined)).toThrow(expect.objectContaining({ code: "KEEL_NO_TASK" }));
  });
});

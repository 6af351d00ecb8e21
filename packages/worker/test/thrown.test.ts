/**
 * `safeThrown`: an ordinary error passes through untouched (identity kept), anything else becomes
 * a `JobThrewError` that describes it, and nothing about the value can make it throw.
 */
import { Cancelled, isTransient } from "@keel/core";
import { isJobThrewError, JobThrewError } from "@keel/worker";
import { describe, expect, it } from "vitest";
import { safeThrown } from "../src/thrown.js";
import { hostileProxy, poisons } from "./fixtures/poison.js";

describe("safeThrown", () => {
  it("a thrown plain object lends its retry hints: { status: 503 } and a network code are retried by isTransient, the rest are not", () => {
    const retried = [{ status: 503 }, { statusCode: 429 }, { code: "ECONNRESET" }, { retryable: true }];
    for (const v of retried) expect(isTransient(safeThrown(v, "q", "j"))).toBe(true);
    const rejected = [{}, { status: 400 }, { retryable: false, status: 503 }, "boom", Object.create(null)];
    for (const v of rejected) expect(isTransient(safeThrown(v, "q", "j"))).toBe(false);
    const e = safeThrown({ status: 503, retryAfterMs: 250, code: { circular: true } }, "q", "j");
    expect(e).toMatchObject({ code: "KEEL_JOB_THREW", status: 503, retryAfterMs: 250, retryable: undefined });
    const hostile = {
      get status(): number {
        throw new Error("no");
      },
    };
    expect(safeThrown(hostile, "q", "j")).toMatchObject({ retryable: false });
  });

  it("gives back an ordinary error itself: subclasses, causes, codes, AggregateErrors", () => {
    const values: Error[] = [
      new Error("plain"),
      new TypeError("typed"),
      Object.assign(new Error("unavailable"), { status: 503, code: "ECONNRESET", retryAfterMs: 200 }),
      new Error("outer", { cause: new Error("inner", { cause: "a string cause" }) }),
      new AggregateError([new Error("a"), new RangeError("b")], "both"),
      new JobThrewError("q", "j", 'a string "x"', "x"),
    ];
    for (const e of values) expect(safeThrown(e, "q", "j")).toBe(e);
  });

  it("gives back a Cancelled itself, so that the delivery still tells a cut from a failure", () => {
    const c = new Cancelled({ kind: "cancelled", message: "test" } as ConstructorParameters<
      typeof Cancelled
    >[0]);
    expect(safeThrown(c, "q", "j")).toBe(c);
  });

  it("reads a getter of an error's own class once, and keeps the error when it answers", () => {
    let reads = 0;
    class Flaky extends Error {
      get retryable(): boolean {
        reads++;
        return true;
      }
    }
    const e = new Flaky("flaky");
    expect(safeThrown(e, "q", "j")).toBe(e);
    expect(reads).toBe(1);
  });

  it.each(poisons.filter((p) => p.carried === "wrapped").map((p) => [p.name, p] as const))(
    "wraps %s in a JobThrewError that describes it and keeps it",
    (_name, poison) => {
      const value = poison.make();
      const e = safeThrown(value, "mail", "m1") as JobThrewError;
      expect(isJobThrewError(e)).toBe(true);
      expect(e).toBeInstanceOf(JobThrewError);
      expect(e.message).toMatch(/^mail\/m1: handler threw /);
      expect(e.message).toMatch(poison.says);
      expect(e.retryable).toBe(false);
      expect(Object.is(e.thrown, value)).toBe(true);
      expect(Object.keys(e)).not.toContain("thrown");
    },
  );

  it.each(poisons.filter((p) => p.carried !== "wrapped").map((p) => [p.name, p] as const))(
    "never throws on %s",
    (_name, poison) => {
      expect(() => safeThrown(poison.make(), "q", "j")).not.toThrow();
    },
  );

  it("bounds the description of a huge value", () => {
    const e = safeThrown({ blob: "y".repeat(1_000_000) }, "q", "j") as Error;
    expect(e.message.length).toBeLessThan(300);
    expect(e.message).toMatch(/^q\/j: handler threw an object \{"blob":"y+…$/);
  });

  it("names the class of an object that is no error, and a member of an AggregateError that throws", () => {
    class Reply {
      constructor(readonly status: number) {}
    }
    expect((safeThrown(new Reply(503), "q", "j") as Error).message).toBe(
      'q/j: handler threw a Reply Reply {"status":503}',
    );
    const members = [new Error("fine")];
    Object.defineProperty(members, 1, {
      get() {
        throw new Error("member");
      },
      enumerable: true,
    });
    const agg = new AggregateError([], "some");
    Object.defineProperty(agg, "errors", { value: members });
    expect((safeThrown(agg, "q", "j") as Error).message).toBe(
      "q/j: handler threw an AggregateError whose errors[1] throws when read: AggregateError: some",
    );
  });

  it("finds a Proxy down a cause chain, and stops at a cycle", () => {
    const deep = new Error("top", {
      cause: new Error("mid", { cause: { code: "X", cause: hostileProxy() } }),
    });
    expect((safeThrown(deep, "q", "j") as Error).message).toBe(
      "q/j: handler threw an Error whose cause.cause.cause is a Proxy: Error: top",
    );
    const a = new Error("a");
    a.cause = { cause: a };
    expect(safeThrown(a, "q", "j")).toBe(a);
  });

  it("leaves an AggregateError with more than 1000 members described, not walked", () => {
    const big = new AggregateError(
      Array.from({ length: 1001 }, () => new Error("m")),
      "many",
    );
    expect((safeThrown(big, "q", "j") as Error).message).toBe(
      "q/j: handler threw an AggregateError whose errors has 1001 members: AggregateError: many",
    );
  });
});

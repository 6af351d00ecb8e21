import { describe, expect, it } from "vitest";
import { describeThrown } from "./format-value.js";

describe("describeThrown: one readable line for whatever was thrown", () => {
  it.each([
    ["an Error", new TypeError("bad input"), "TypeError: bad input"],
    ["an Error without a message", new RangeError(), "RangeError"],
    ["a multi-line message", new Error("one\ntwo"), "Error: one"],
    ["a string", "boom", '"boom"'],
    ["a number", 42, "42"],
    ["undefined", undefined, "undefined"],
    ["null", null, "null"],
    ["a bigint", 5n, "5n"],
    ["a symbol", Symbol("s"), "Symbol(s)"],
    ["a function", function named() {}, "[Function named]"],
    ["a plain object", { status: 503, body: "down" }, '{"status":503,"body":"down"}'],
    ["an array", [1, "a"], '[1,"a"]'],
    [
      "a class instance",
      new (class Response {
        ok = false;
      })(),
      'Response {"ok":false}',
    ],
    ["an object holding an error", { cause: new Error("inner") }, '{"cause":"Error: inner"}'],
    ["a null-prototype object", Object.assign(Object.create(null), { a: 1 }), '{"a":1}'],
  ])("%s", (_name, value, expected) => {
    expect(describeThrown(value)).toBe(expected);
  });

  it("never prints [object Object] for a plain object", () => {
    expect(describeThrown({ code: "E_DOWN" })).not.toContain("[object Object]");
  });

  it("survives cycles, bigints inside objects, and hostile toJSON", () => {
    const cyclic: Record<string, unknown> = { n: 1n };
    cyclic.self = cyclic;
    expect(describeThrown(cyclic)).toBe('{"n":"1n","self":"[Circular]"}');
    const hostile = {
      toJSON() {
        throw new Error("no");
      },
    };
    expect(describeThrown(hostile)).toBe("[object Object]");
    const noJson = { toJSON: () => undefined };
    expect(describeThrown(noJson)).toBe("[object Object]");
  });

  it("cuts a long description to one line of at most 200 characters", () => {
    const text = describeThrown({ long: "x".repeat(1000) });
    expect(text.length).toBe(200);
    expect(text.endsWith("…")).toBe(true);
  });
});

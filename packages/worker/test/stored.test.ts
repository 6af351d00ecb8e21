/**
 * `storedError`: what the BullMQ engine writes to Redis for an error. It never throws, whatever it
 * is given, and what it gives JSON can always hold, bounded.
 */
import { describe, expect, it } from "vitest";
import { failedError, revive, storedError } from "../src/bullmq/stored.js";
import { hostileProxy, poisons } from "./fixtures/poison.js";

describe("storedError", () => {
  it("keeps name, message, code and three causes of an ordinary error, and revives them", () => {
    const e = Object.assign(
      new TypeError("outer", {
        cause: new Error("1", {
          cause: new Error("2", { cause: new Error("3", { cause: new Error("4") }) }),
        }),
      }),
      { code: "E_OUTER" },
    );
    const s = storedError(e);
    expect(s).toEqual({
      name: "TypeError",
      message: "outer",
      code: "E_OUTER",
      cause: {
        name: "Error",
        message: "1",
        cause: { name: "Error", message: "2", cause: { name: "Error", message: "3" } },
      },
    });
    const back = revive(s);
    expect([back.name, back.message, (back as { code?: unknown }).code]).toEqual([
      "TypeError",
      "outer",
      "E_OUTER",
    ]);
  });

  it.each(poisons.map((p) => [p.name, p] as const))("stores %s as JSON, never throwing", (_name, poison) => {
    const s = storedError(poison.make());
    const json = JSON.stringify(s);
    expect(json.length).toBeLessThan(10_000);
    expect(typeof JSON.parse(json).message).toBe("string");
  });

  it("describes a code JSON cannot hold: a BigInt, a Symbol, a circular object", () => {
    const circular: Record<string, unknown> = { k: 1 };
    circular.self = circular;
    const codes = [10n, Symbol("c"), circular, Number.NaN].map(
      (code) => storedError(Object.assign(new Error("m"), { code })).code,
    );
    expect(codes).toEqual(["10n", "Symbol(c)", '{"k":1,"self":"[Circular]"}', "NaN"]);
  });

  it("says which field could not be read", () => {
    const e = new Error("m");
    Object.defineProperty(e, "code", {
      get() {
        throw new Error("no code");
      },
    });
    expect(storedError(e).code).toBe("[code threw: Error: no code]");
    expect(storedError(hostileProxy())).toEqual({
      name: "[name threw: Error: trap get]",
      message: "[message threw: Error: trap get]",
      code: "[code threw: Error: trap get]",
      cause: { message: "[cause threw: Error: trap get]" },
    });
  });

  it("ends a circular cause chain where it comes back", () => {
    const a = new Error("a");
    const b = new Error("b", { cause: a });
    a.cause = b;
    expect(storedError(a)).toEqual({ name: "Error", message: "a", cause: { name: "Error", message: "b" } });
  });

  it("cuts a huge message, and a dead letter's BullMQ error keeps the cut message and stack", () => {
    const e = new Error("z".repeat(100_000));
    const s = storedError(e);
    expect(s.message).toBe(`${"z".repeat(2000)}… (98000 more characters)`);
    const failed = failedError(s, e);
    expect(failed.message).toBe(s.message);
    expect(failed.stack?.length).toBeLessThanOrEqual(8000 + 40);
    expect(failedError({ message: "m", name: "N" }, hostileProxy()).stack).toBe("N: m");
  });
});

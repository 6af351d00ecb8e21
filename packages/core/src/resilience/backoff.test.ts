/**
 * Backoff steppers, tested by listing their delays: no clock, no runtime.
 */
import { type Backoff, type BackoffState, constant, exponential, fromDelays, type Jitter } from "@keel/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

/** The first `n` delays of `b`, drawing each step's random number from `randoms` (the last one repeats). */
function delays(b: Backoff, randoms: number | readonly number[], n = 6): number[] {
  const list = typeof randoms === "number" ? [randoms] : randoms;
  const out: number[] = [];
  let state: BackoffState;
  for (let i = 0; i < n; i++) {
    const r = list[Math.min(i, list.length - 1)]!;
    const step = b.next(state, () => r);
    out.push(step.delayMs);
    state = step.state;
  }
  return out;
}

const jitters: readonly Jitter[] = ["full", "equal", "decorrelated", "none"];
const section = (jitter: Jitter) => exponential({ baseMs: 100, factor: 2, maxMs: 1000, jitter });

describe("exponential", () => {
  it("full jitter draws random · min(maxMs, baseMs · factor^(n-1))", () => {
    expect(delays(section("full"), 0.5)).toEqual([50, 100, 200, 400, 500, 500]);
    expect(delays(section("full"), 0.999)).toEqual([99.9, 199.8, 399.6, 799.2, 999, 999]);
    expect(delays(section("full"), 0)).toEqual([0, 0, 0, 0, 0, 0]);
  });

  it("no jitter gives the capped exponential whatever the random number", () => {
    for (const r of [0, 0.5, 0.999]) {
      expect(delays(section("none"), r)).toEqual([100, 200, 400, 800, 1000, 1000]);
    }
  });

  it("equal jitter gives t/2 + random · t/2: half the delay is guaranteed", () => {
    expect(delays(section("equal"), 0.5)).toEqual([75, 150, 300, 600, 750, 750]);
    expect(delays(section("equal"), 0)).toEqual([50, 100, 200, 400, 500, 500]);
  });

  it("decorrelated jitter draws from [baseMs, 3 · previous], capped at maxMs", () => {
    expect(delays(section("decorrelated"), 0)).toEqual([100, 100, 100, 100, 100, 100]);
    expect(delays(section("decorrelated"), 0.5)).toEqual([200, 350, 575, 912.5, 1000, 1000]);
  });

  it("decorrelated jitter follows the previous delay, not the attempt number", () => {
    // A low draw pulls the next range down again: 100 + 0.5 · (3 · 100 - 100) = 200 after a 100.
    expect(delays(section("decorrelated"), [0.5, 0.5, 0, 0.5])).toEqual([200, 350, 100, 200, 350, 575]);
  });

  it("the default jitter is full and the default factor is 2", () => {
    const b = exponential({ baseMs: 100, maxMs: 1000 });
    expect(delays(b, 0.5)).toEqual([50, 100, 200, 400, 500, 500]);
    expect(b.description).toBe("exponential(100 ×2 ≤1000, full jitter)");
  });

  it("without maxMs the delays keep growing", () => {
    expect(delays(exponential({ baseMs: 100, factor: 3, jitter: "none" }), 0.5, 7)).toEqual([
      100, 300, 900, 2700, 8100, 24300, 72900,
    ]);
  });

  it("maxMs equal to baseMs, or factor 1, gives a constant delay", () => {
    expect(delays(exponential({ baseMs: 100, factor: 2, maxMs: 100, jitter: "none" }), 0.5)).toEqual([
      100, 100, 100, 100, 100, 100,
    ]);
    expect(delays(exponential({ baseMs: 100, factor: 1, maxMs: 1000, jitter: "none" }), 0.5)).toEqual([
      100, 100, 100, 100, 100, 100,
    ]);
  });

  it("a cap below the second step holds every later delay at maxMs", () => {
    expect(delays(exponential({ baseMs: 100, factor: 10, maxMs: 250, jitter: "none" }), 0.5)).toEqual([
      100, 250, 250, 250, 250, 250,
    ]);
    expect(delays(exponential({ baseMs: 100, factor: 10, maxMs: 250, jitter: "full" }), 0.5)).toEqual([
      50, 125, 125, 125, 125, 125,
    ]);
  });

  it("the cap holds far down the sequence, where factor^n overflows", () => {
    const last = delays(exponential({ baseMs: 100, factor: 2, maxMs: 1000, jitter: "none" }), 0.5, 1200).at(
      -1,
    );
    expect(last).toBe(1000);
  });

  it("describes itself for events and docs", () => {
    expect(exponential({ baseMs: 200, factor: 2, maxMs: 3000, jitter: "full" }).description).toBe(
      "exponential(200 ×2 ≤3000, full jitter)",
    );
  });

  it("no delay is negative or above maxMs, for any options and random draws in [0, 1)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10_000 }),
        fc.double({ min: 1, max: 10, noNaN: true }),
        fc.integer({ min: 0, max: 100_000 }),
        fc.constantFrom(...jitters),
        fc.array(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), {
          minLength: 1,
          maxLength: 20,
        }),
        (baseMs, factor, extraMs, jitter, randoms) => {
          const maxMs = baseMs + extraMs;
          for (const d of delays(exponential({ baseMs, factor, maxMs, jitter }), randoms, randoms.length)) {
            expect(d).toBeGreaterThanOrEqual(0);
            expect(d).toBeLessThanOrEqual(maxMs);
            if (jitter === "decorrelated") expect(d).toBeGreaterThanOrEqual(baseMs);
          }
        },
      ),
    );
  });

  it("is pure: the same state and random number give the same delay and state, and the state is not mutated", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...jitters),
        fc.array(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), {
          minLength: 1,
          maxLength: 10,
        }),
        (jitter, randoms) => {
          const b = section(jitter);
          let state: BackoffState;
          for (const r of randoms) {
            const before = state === undefined ? undefined : { ...state };
            const first = b.next(state, () => r);
            const again = section(jitter).next(state, () => r);
            expect(again).toEqual(first);
            expect(state).toEqual(before);
            state = first.state;
          }
        },
      ),
    );
  });

  const badOptions: ReadonlyArray<[string, Record<string, unknown>, RegExp]> = [
    ["baseMs NaN", { baseMs: Number.NaN }, /baseMs/],
    ["baseMs -1", { baseMs: -1 }, /baseMs/],
    ["baseMs Infinity", { baseMs: Infinity }, /baseMs/],
    ["baseMs missing", {}, /baseMs/],
    ["factor NaN", { baseMs: 100, factor: Number.NaN }, /factor/],
    ["factor 0.5", { baseMs: 100, factor: 0.5 }, /factor/],
    ["factor -2", { baseMs: 100, factor: -2 }, /factor/],
    ["factor Infinity", { baseMs: 100, factor: Infinity }, /factor/],
    ["maxMs NaN", { baseMs: 100, maxMs: Number.NaN }, /maxMs/],
    ["maxMs below baseMs", { baseMs: 100, maxMs: 50 }, /maxMs/],
    ["maxMs -1", { baseMs: 100, maxMs: -1 }, /maxMs/],
  ];
  for (const [what, options, names] of badOptions) {
    it(`${what} is a RangeError naming the option`, () => {
      const make = () => exponential(options as Parameters<typeof exponential>[0]);
      expect(make).toThrow(RangeError);
      expect(make).toThrow(names);
    });
  }

  it("an unknown jitter is rejected with an error naming jitter", () => {
    const make = () => exponential({ baseMs: 100, jitter: "wild" as Jitter });
    expect(make).toThrow(/jitter/);
    expect(make).toThrow(expect.objectContaining({ code: "KEEL_INVALID_ARGUMENT" }));
  });
});

describe("constant", () => {
  it("gives the same delay every time", () => {
    expect(delays(constant(250), [0, 0.5, 0.999])).toEqual([250, 250, 250, 250, 250, 250]);
    expect(delays(constant(0), 0.5, 3)).toEqual([0, 0, 0]);
  });

  for (const bad of [Number.NaN, -1, Infinity]) {
    it(`constant(${bad}) is a RangeError naming ms`, () => {
      expect(() => constant(bad)).toThrow(RangeError);
      expect(() => constant(bad)).toThrow(/constant\(ms\)/);
    });
  }
});

describe("fromDelays", () => {
  it("gives the delays in order, then the last one again", () => {
    expect(delays(fromDelays([10, 20, 40]), 0.5, 3)).toEqual([10, 20, 40]);
    expect(delays(fromDelays([10, 20, 40]), 0.5, 6)).toEqual([10, 20, 40, 40, 40, 40]);
    expect(delays(fromDelays([7]), 0.5, 3)).toEqual([7, 7, 7]);
  });

  it("an empty list is a RangeError", () => {
    expect(() => fromDelays([])).toThrow(RangeError);
    expect(() => fromDelays([])).toThrow(/delays/);
  });

  it("a NaN or negative delay is a RangeError naming its index", () => {
    expect(() => fromDelays([10, Number.NaN])).toThrow(RangeError);
    expect(() => fromDelays([10, Number.NaN])).toThrow(/delays\[1\]/);
    expect(() => fromDelays([-5])).toThrow(/delays\[0\]/);
  });
});

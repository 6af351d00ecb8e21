/**
 * Backoff policies as pure steppers: `next(state, random)` gives a delay and the next state, with no
 * clock inside, so a policy is tested by listing its delays.
 * @module
 */
import { invalidRange, invalidType } from "../errors.js";

/**
 * The state a stepper threads through; opaque to callers (start with `undefined`).
 *
 * @example
 * ```ts
 * import { type BackoffState, exponential } from "@keel/core";
 * const b = exponential({ baseMs: 100, jitter: "equal" });
 * let state: BackoffState; // undefined: before the first attempt
 * const delays: number[] = [];
 * for (let i = 0; i < 4; i++) {
 *   const step = b.next(state, () => 0.5);
 *   delays.push(step.delayMs);
 *   state = step.state;
 * }
 * console.log(delays, state?.attempt); // [75, 150, 300, 600] 4
 * ```
 */
export type BackoffState = { readonly attempt: number; readonly previousMs: number } | undefined;

/**
 * A delay policy between attempts.
 *
 * @example
 * ```ts
 * import { type Backoff, retry, run } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * // A policy of your own: 100 ms more before each attempt, no jitter.
 * const linear: Backoff = {
 *   description: "linear(100)",
 *   next(state) {
 *     const attempt = (state?.attempt ?? 0) + 1;
 *     return { delayMs: attempt * 100, state: { attempt, previousMs: attempt * 100 } };
 *   },
 * };
 * const clock = createVirtualClock();
 * const tries: number[] = [];
 * await run(() => retry(function* flaky() {
 *   tries.push(clock.now());
 *   if (tries.length < 4) throw Object.assign(new Error("busy"), { status: 503 });
 * }, { backoff: linear }), { clock });
 * console.log(tries); // [0, 100, 300, 600]
 * ```
 */
export interface Backoff {
  /** The delay before the next attempt, given what came before; `random` returns a number in [0, 1). */
  next(state: BackoffState, random: () => number): { delayMs: number; state: BackoffState };
  /** A short description for events and docs: `exponential(200 ×2 ≤3000, full jitter)`. */
  readonly description: string;
}

/**
 * How randomness spreads the delays of many clients apart.
 *
 * @example
 * ```ts
 * import { exponential, type Jitter } from "@keel/core";
 * const kinds: Jitter[] = ["none", "full", "equal", "decorrelated"];
 * const first = kinds.map((jitter) => exponential({ baseMs: 100, jitter }).next(undefined, () => 0.5).delayMs);
 * console.log(first); // [100, 50, 75, 200]
 * ```
 */
export type Jitter = "full" | "equal" | "decorrelated" | "none";

function positive(parameter: string, v: unknown): number {
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0)
    throw invalidRange(parameter, "a finite number ≥ 0", v);
  return v;
}

/**
 * Capped exponential backoff: the n-th delay is drawn from `t = min(maxMs, baseMs · factor^(n-1))`:
 * `"full"` jitter gives `random · t`, `"equal"` gives `t/2 + random · t/2`, `"none"` gives `t`, and
 * `"decorrelated"` gives `min(maxMs, baseMs + random · (3 · previous - baseMs))`. Full jitter is the
 * default in `retry`: it spreads a thundering herd the most.
 *
 * @example
 * ```ts
 * import { exponential } from "@keel/core";
 * const b = exponential({ baseMs: 100, factor: 2, maxMs: 1000, jitter: "none" });
 * let s; const delays = [];
 * for (let i = 0; i < 5; i++) { const r = b.next(s, Math.random); delays.push(r.delayMs); s = r.state; }
 * console.log(delays); // [100, 200, 400, 800, 1000]
 * ```
 * @throws `RangeError` naming the option for NaN, negative or inconsistent values.
 */
export function exponential(options: {
  baseMs: number;
  factor?: number;
  maxMs?: number;
  jitter?: Jitter;
}): Backoff {
  const baseMs = positive("exponential({ baseMs })", options?.baseMs);
  const factor = options.factor ?? 2;
  if (typeof factor !== "number" || !Number.isFinite(factor) || factor < 1) {
    throw invalidRange("exponential({ factor })", "a finite number ≥ 1", factor);
  }
  const maxMs = options.maxMs ?? Infinity;
  if (typeof maxMs !== "number" || Number.isNaN(maxMs) || maxMs < baseMs) {
    throw invalidRange("exponential({ maxMs })", `a number ≥ baseMs (${baseMs})`, maxMs);
  }
  const jitter = options.jitter ?? "full";
  if (!["full", "equal", "decorrelated", "none"].includes(jitter)) {
    throw invalidType("exponential({ jitter })", '"full", "equal", "decorrelated" or "none"', jitter);
  }
  return {
    description: `exponential(${baseMs} ×${factor} ≤${maxMs}, ${jitter} jitter)`,
    next(state, random) {
      const attempt = (state?.attempt ?? 0) + 1;
      const t = Math.min(maxMs, baseMs * factor ** (attempt - 1));
      const r = random();
      let delayMs: number;
      if (jitter === "full") delayMs = r * t;
      else if (jitter === "equal") delayMs = t / 2 + (r * t) / 2;
      else if (jitter === "none") delayMs = t;
      else {
        const previous = state?.previousMs ?? baseMs;
        delayMs = Math.min(maxMs, baseMs + r * Math.max(0, 3 * previous - baseMs));
      }
      delayMs = Math.min(maxMs, Math.max(0, delayMs));
      return { delayMs, state: { attempt, previousMs: delayMs } };
    },
  };
}

/**
 * The same delay every time.
 *
 * @example
 * ```ts
 * import { constant } from "@keel/core";
 * console.log(constant(250).next(undefined, Math.random).delayMs); // 250
 * ```
 */
export function constant(ms: number): Backoff {
  const delayMs = positive("constant(ms)", ms);
  return {
    description: `constant(${delayMs})`,
    next: (state) => ({ delayMs, state: { attempt: (state?.attempt ?? 0) + 1, previousMs: delayMs } }),
  };
}

/**
 * The given delays in order, then the last one again.
 *
 * @example
 * ```ts
 * import { fromDelays } from "@keel/core";
 * const b = fromDelays([10, 20, 40]);
 * const first = b.next(undefined, Math.random);
 * console.log(first.delayMs, b.next(first.state, Math.random).delayMs); // 10 20
 * ```
 */
export function fromDelays(delays: readonly number[]): Backoff {
  if (!Array.isArray(delays) || delays.length === 0)
    throw invalidRange("fromDelays(delays)", "a non-empty array", delays);
  const list = delays.map((d, i) => positive(`fromDelays(delays[${i}])`, d));
  return {
    description: `fromDelays(${list.join(", ")})`,
    next(state) {
      const attempt = (state?.attempt ?? 0) + 1;
      const delayMs = list[Math.min(attempt, list.length) - 1]!;
      return { delayMs, state: { attempt, previousMs: delayMs } };
    },
  };
}

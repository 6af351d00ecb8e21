/**
 * `createCircuitBreaker`: stop calling a dependency that keeps failing, probe it after a pause.
 * @module
 */

import { checkDurationMs, invalidRange, invalidType, isKeelError, KeelError } from "../errors.js";
import { BoundOp2, nameBody } from "../kernel/bound-op.js";
import { isCancelled } from "../kernel/cancelled.js";
import type { Clock } from "../kernel/clock.js";
import { currentTask, delegate } from "../kernel/current.js";
import type { NotAPromise } from "../kernel/not-a-promise.js";
import { checkOp, type Op, type Operation } from "../kernel/operation.js";
import { CLOCK_KEY, type TaskImpl } from "../kernel/task.js";
import { realClock } from "../time/real-clock.js";

/**
 * `closed`: calls pass; `open`: calls fail at once; `half-open`: one probe call decides.
 *
 * @example
 * ```ts
 * import { type CircuitState, createCircuitBreaker, run, sleep } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const breaker = createCircuitBreaker({ failureThreshold: 1, halfOpenAfterMs: 500 });
 * const states: CircuitState[] = [breaker.state];
 * await run(function* () {
 *   try { yield* breaker.run(function* () { throw new Error("down"); }); } catch {}
 *   states.push(breaker.state);
 *   yield* sleep(500);
 *   states.push(breaker.state);
 * }, { clock: createVirtualClock() });
 * console.log(states); // ["closed", "open", "half-open"]
 * ```
 */
export type CircuitState = "closed" | "open" | "half-open";

/**
 * A circuit breaker.
 *
 * @example
 * ```ts
 * import { type CircuitBreaker, createCircuitBreaker, isBrokenCircuitError, run, sleep } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * function* stock(breaker: CircuitBreaker, healthy: boolean) {
 *   try {
 *     return yield* breaker.run(function* inventory() {
 *       if (!healthy) throw new Error("inventory down");
 *       return "in stock";
 *     });
 *   } catch (e) {
 *     return isBrokenCircuitError(e) ? "skipped" : "failed";
 *   }
 * }
 * const breaker = createCircuitBreaker({ name: "inventory", failureThreshold: 2, halfOpenAfterMs: 1000 });
 * const log = await run(function* () {
 *   const out = [yield* stock(breaker, false), yield* stock(breaker, false), yield* stock(breaker, true)];
 *   yield* sleep(1000);
 *   out.push(breaker.state, yield* stock(breaker, true), breaker.state);
 *   return out;
 * }, { clock: createVirtualClock() });
 * console.log(log); // ["failed", "failed", "skipped", "half-open", "in stock", "closed"]
 * ```
 */
export interface CircuitBreaker {
  readonly name: string;
  /** Computed from the clock: an open breaker reads `half-open` once `halfOpenAfterMs` has passed. */
  readonly state: CircuitState;
  /** Runs `op` through the breaker; throws `BrokenCircuitError` without running it while open. */
  run<T>(op: Op<T>): Operation<T>;
}

/**
 * Thrown, without calling the dependency, while the breaker is open or its probe is in flight.
 *
 * @example
 * ```ts
 * import { BrokenCircuitError, createCircuitBreaker, isTransient, run } from "@keel/core";
 * const breaker = createCircuitBreaker({ name: "payments", failureThreshold: 1, halfOpenAfterMs: 60_000 });
 * const charge = function* () { throw new Error("payments down"); };
 * for (let i = 0; i < 2; i++) {
 *   try {
 *     await run(() => breaker.run(charge)); // the first failure opens the breaker
 *   } catch (e) {
 *     // The second call is not attempted: circuit payments is open: call not attempted false false
 *     if (e instanceof BrokenCircuitError) console.log(e.message, e.retryable, isTransient(e));
 *   }
 * }
 * ```
 */
export class BrokenCircuitError extends KeelError {
  /** Not transient: the default `retryOn` never retries into an open breaker (the avalanche it stops). */
  readonly retryable = false;
  constructor(name: string, state: CircuitState) {
    super("KEEL_BROKEN_CIRCUIT", `circuit ${name} is ${state}: call not attempted`);
    this.name = "BrokenCircuitError";
  }
}

/**
 * True for a {@link BrokenCircuitError}, across duplicate package copies.
 *
 * @example
 * ```ts
 * import { createCircuitBreaker, isBrokenCircuitError, run } from "@keel/core";
 * const breaker = createCircuitBreaker({ name: "pricing", failureThreshold: 1, halfOpenAfterMs: 30_000 });
 * function* price() { return yield* breaker.run(function* () { throw new Error("pricing timed out"); }); }
 * for (let i = 0; i < 2; i++) {
 *   try {
 *     await run(price);
 *   } catch (e) {
 *     console.log(isBrokenCircuitError(e) ? "fallback: cached price" : (e as Error).message);
 *   }
 * }
 * // pricing timed out, then fallback: cached price
 * ```
 */
export function isBrokenCircuitError(e: unknown): e is BrokenCircuitError {
  return isKeelError(e) && e.code === "KEEL_BROKEN_CIRCUIT";
}

/**
 * Creates a breaker that opens after `failureThreshold` failures (consecutive, or within `windowMs`
 * when given), stays open for `halfOpenAfterMs`, then lets one probe through: its success closes the
 * breaker, its failure opens it again. A cancellation is never counted as a failure, nor as a
 * success. The breaker arms no timer: its state is computed from the clock.
 *
 * @example
 * ```ts
 * import { createCircuitBreaker, run } from "@keel/core";
 * const breaker = createCircuitBreaker({ failureThreshold: 2, halfOpenAfterMs: 1000 });
 * const boom = function* () { throw new Error("down"); };
 * for (let i = 0; i < 3; i++) {
 *   try { await run(() => breaker.run(boom)); } catch (e) { console.log((e as Error).name); } // Error, Error, BrokenCircuitError
 * }
 * console.log(breaker.state); // "open"
 * ```
 * @throws `RangeError` naming the option for a bad threshold or duration.
 */
export function createCircuitBreaker(options: {
  failureThreshold: number;
  windowMs?: number;
  halfOpenAfterMs: number;
  isFailure?: (error: unknown) => boolean;
  name?: string;
}): CircuitBreaker {
  const threshold = options?.failureThreshold;
  if (typeof threshold !== "number" || !Number.isInteger(threshold) || threshold < 1) {
    throw invalidRange("createCircuitBreaker({ failureThreshold })", "a whole number ≥ 1", threshold);
  }
  const halfOpenAfterMs = checkDurationMs(
    "createCircuitBreaker({ halfOpenAfterMs })",
    options.halfOpenAfterMs,
    false,
  );
  const windowMs = options.windowMs;
  if (windowMs !== undefined) checkDurationMs("createCircuitBreaker({ windowMs })", windowMs);
  const isFailure = options.isFailure ?? (() => true);
  if (typeof isFailure !== "function")
    throw invalidType("createCircuitBreaker({ isFailure })", "a function", isFailure);
  const name = options.name ?? "breaker";
  return new Breaker(name, threshold, windowMs, halfOpenAfterMs, isFailure);
}

/**
 * A breaker's state. Its `run` is a module-level generator bound to it, not a generator function
 * made per breaker (each generator function gives its generators a hidden class of their own).
 */
class Breaker implements CircuitBreaker {
  /** The clock of the last run (the breaker arms no timer; its state is computed from this). */
  clock: Clock = realClock;
  /** When the breaker opened. Invariant: null exactly when closed. */
  openedAt: number | null = null;
  probing = false;
  /** Failure instants within the window (or since the last success). */
  readonly failures: number[] = [];

  constructor(
    readonly name: string,
    readonly threshold: number,
    readonly windowMs: number | undefined,
    readonly halfOpenAfterMs: number,
    readonly isFailure: (error: unknown) => boolean,
  ) {}

  get state(): CircuitState {
    return this.stateAt(this.clock.now());
  }

  // An arrow property, not a method: `ops.map(breaker.run)` keeps working.
  readonly run = <T>(op: Op<T>): Operation<T> & NotAPromise => {
    checkOp("breaker.run(op)", op);
    return new BoundOp2(runThrough<T>, this, op);
  };

  stateAt(at: number): CircuitState {
    if (this.openedAt === null) return "closed";
    return at - this.openedAt >= this.halfOpenAfterMs ? "half-open" : "open";
  }

  recordFailure(at: number): void {
    const failures = this.failures;
    failures.push(at);
    const windowMs = this.windowMs;
    if (windowMs !== undefined) while (failures.length > 0 && at - failures[0]! > windowMs) failures.shift();
    if (failures.length >= this.threshold) {
      this.openedAt = at;
      failures.length = 0;
    }
  }

  /** Emits `breaker:state` when the state now differs from `from`. */
  report(task: TaskImpl<unknown>, from: CircuitState): void {
    const to = this.stateAt(this.clock.now());
    if (to !== from) task.emit({ type: "breaker:state", name: this.name, from, to });
  }
}

/** `run(op)`'s body. */
function* runThrough<T>(b: Breaker, op: Op<T>): Generator<unknown, T, unknown> {
  const task = yield* currentTask(`breaker ${b.name}.run(op)`);
  task.checkpoint();
  b.clock = task.top.contexts[CLOCK_KEY] as Clock;
  const state = b.stateAt(b.clock.now());
  const probe = state === "half-open";
  if (state === "open" || (probe && b.probing))
    throw new BrokenCircuitError(b.name, b.probing ? "half-open" : state);
  if (probe) b.probing = true;
  try {
    const value = yield* delegate(op);
    if (probe || b.openedAt === null) {
      b.openedAt = null;
      b.failures.length = 0;
    }
    if (probe) b.report(task, "half-open");
    return value;
  } catch (e) {
    if (!isCancelled(e) && b.isFailure(e)) {
      if (probe) {
        b.openedAt = b.clock.now();
        b.report(task, "half-open");
      } else if (b.openedAt === null) {
        b.recordFailure(b.clock.now());
        b.report(task, "closed");
      }
    }
    throw e;
  } finally {
    if (probe) b.probing = false;
  }
}

// What an awaited one of these operations is called in its KEEL_OPERATION_AWAITED error.
nameBody(runThrough, "breaker.run");

/**
 * The runtime's random source, a context, so tests can pin jitter.
 * @module
 */

import { invalidType } from "../errors.js";
import { withContextValue } from "./context.js";
import { currentTask } from "./current.js";
import { type NotAPromise, notAPromise } from "./not-a-promise.js";
import { checkOp, type Op, type Operation } from "./operation.js";
import type { TaskImpl } from "./task.js";

/**
 * A source of numbers in [0, 1).
 *
 * @example
 * ```ts
 * import { random, type RandomSource, run } from "@keel/core";
 * const values = [0.1, 0.5, 0.9];
 * let i = 0;
 * const cycling: RandomSource = () => values[i++ % values.length]!; // deterministic jitter for tests
 * const drawn = await run(function* () {
 *   return [yield* random(), yield* random(), yield* random(), yield* random()];
 * }, { random: cycling });
 * console.log(drawn); // [0.1, 0.5, 0.9, 0.1]
 * ```
 */
export type RandomSource = () => number;

const RANDOM_KEY: unique symbol = Symbol("keel.random");

/** The random source in force for `task` (`Math.random` unless one was set). */
export function randomSourceOf(task: TaskImpl<unknown>): RandomSource {
  return (task.top.contexts[RANDOM_KEY] as RandomSource | undefined) ?? Math.random;
}

/**
 * Runs `op` with `source` as the random source: backoff jitter and anything else in Keel that draws
 * a random number reads it from here, never from `Math.random` directly.
 *
 * @example
 * ```ts
 * import { random, run, withRandom } from "@keel/core";
 * console.log(await run(() => withRandom(() => 0.5, random))); // 0.5
 * ```
 * @throws `TypeError` when `source` is not a function.
 */
export function withRandom<T>(source: RandomSource, op: Op<T>): Operation<T> & NotAPromise {
  if (typeof source !== "function")
    throw invalidType("withRandom(source)", "a function returning a number in [0, 1)", source);
  checkOp("withRandom(source, op)", op);
  return withContextValue(RANDOM_KEY, source, op);
}

/**
 * Draws a number in [0, 1) from the runtime's random source.
 *
 * @example
 * ```ts
 * import { random, run } from "@keel/core";
 * const r = await run(random);
 * console.log(r >= 0 && r < 1); // true
 * ```
 */
export function random(): Operation<number> & NotAPromise {
  return RANDOM;
}

/** Shared: it holds no state, and a literal with a generator method per call costs ~400 ns. */
const RANDOM: Operation<number> & NotAPromise = notAPromise(
  {
    *[Symbol.iterator]() {
      const task = yield* currentTask("random()");
      return randomSourceOf(task)();
    },
  },
  "random()",
);

/** The context key, for `run(op, { random })`. */
export const RANDOM_CONTEXT_KEY = RANDOM_KEY;

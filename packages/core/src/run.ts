/**
 * `run`: start a root task.
 * @module
 */
import { checkDurationMs, invalidType } from "./errors.js";
import { captureAsyncContext } from "./kernel/async-context.js";
import type { Clock } from "./kernel/clock.js";
import type { ContextValues } from "./kernel/context.js";
import { checkOp, nameOf, type Op } from "./kernel/operation.js";
import { RANDOM_CONTEXT_KEY, type RandomSource } from "./kernel/random.js";
import { createRuntime } from "./kernel/runtime.js";
import { BUDGET_KEY, CLOCK_KEY, DEFAULT_CLEANUP_BUDGET_MS, type Task, TaskImpl } from "./kernel/task.js";
import type { KeelEvent } from "./observe/events.js";
import { realClock } from "./time/real-clock.js";

/**
 * Options of {@link run}.
 *
 * @example
 * ```ts
 * import { type KeelEvent, random, type RunOptions, run, sleep } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const events: KeelEvent[] = [];
 * const options: RunOptions = {
 *   name: "nightly",
 *   clock: createVirtualClock(), // an hour passes in a millisecond
 *   cleanupBudgetMs: 1000,
 *   onEvent: (e) => events.push(e),
 *   random: () => 0.25,
 * };
 * const drawn = await run(function* () { yield* sleep(3_600_000); return yield* random(); }, options);
 * console.log(drawn, events.map((e) => `${e.type}@${e.at}`)); // 0.25 ["task:start@0", "task:settle@3600000"]
 * ```
 */
export interface RunOptions {
  /** The task's name in the tree and in events (default: the generator function's name). */
  name?: string;
  /** The clock for every timer in the tree (default: the real clock; tests pass a virtual one). */
  clock?: Clock;
  /** How long unwinding may take once a cancellation is delivered (default 5000 ms). */
  cleanupBudgetMs?: number;
  /** Receives every event of the tree; without it, warnings go to `console.warn`. */
  onEvent?: (event: KeelEvent) => void;
  /** The random source for jitter and anything else random in the tree (default `Math.random`). */
  random?: RandomSource;
}

/**
 * Starts `op` as a root task and returns it at once; the body starts on the next turn.
 *
 * Await the task for its value (a cancelled task rejects with `TaskCancelledError`), or call
 * `task.cancel()`, which settles once everything under it has unwound. Nothing is reported as an
 * unhandled rejection unless you await the task and ignore the error.
 *
 * Every step of the tree's tasks runs in the async context (`AsyncLocalStorage` stores) in force at
 * this call, whatever other runs do meanwhile: see the guide's async context page.
 *
 * @example
 * ```ts
 * import { run, sleep } from "@keel/core";
 * const task = run(function* hello() { yield* sleep(10); return "hello"; });
 * console.log(await task); // "hello"
 * ```
 * @throws `TypeError` when `op` is not an operation; `RangeError` for a bad `cleanupBudgetMs`.
 */
export function run<T>(op: Op<T>, options: RunOptions = {}): Task<T> {
  checkOp("run(op)", op);
  const budget = options.cleanupBudgetMs ?? DEFAULT_CLEANUP_BUDGET_MS;
  checkDurationMs("run(op, { cleanupBudgetMs })", budget);
  const clock = options.clock ?? realClock;
  if (options.random !== undefined && typeof options.random !== "function") {
    throw invalidType("run(op, { random })", "a function returning a number in [0, 1)", options.random);
  }
  const task = new TaskImpl(op, {
    name: options.name ?? nameOf(op, "run"),
    parent: null,
    owner: null,
    runtime: createRuntime(captureAsyncContext(), options.onEvent, clock.now()),
    contexts: rootContexts(clock, budget, options.random),
    deadline: Infinity,
  });
  return task.start();
}

/**
 * Built by assignment, not with a spread: a spread of symbol keys leaves the object in dictionary
 * mode, and every task reads its clock and budget from here (or from a frame that inherits them).
 */
function rootContexts(clock: Clock, budget: number, random: RandomSource | undefined): ContextValues {
  const contexts: ContextValues = { [CLOCK_KEY]: clock, [BUDGET_KEY]: budget };
  if (random) contexts[RANDOM_CONTEXT_KEY] = random;
  return contexts;
}

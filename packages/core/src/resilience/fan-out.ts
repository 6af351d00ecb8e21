/**
 * `mapLimit` and `forEachLimit`: bounded fan-out with `all()`'s failure semantics.
 * @module
 */
import { invalidRange, invalidType } from "../errors.js";
import { all } from "../kernel/all.js";
import { BoundOp3 } from "../kernel/bound-op.js";
import { delegate } from "../kernel/current.js";
import type { Operation } from "../kernel/operation.js";

function check<T>(api: string, items: Iterable<T>, limit: number, fn: unknown): T[] {
  if (items === null || typeof (items as Iterable<T>)?.[Symbol.iterator] !== "function")
    throw invalidType(`${api}(items)`, "an iterable", items);
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1)
    throw invalidRange(`${api}(items, limit)`, "a whole number ≥ 1", limit);
  if (typeof fn !== "function")
    throw invalidType(`${api}(items, limit, fn)`, "a function returning an operation", fn);
  return [...items];
}

/**
 * Runs `fn` over `items` with at most `limit` running at once and returns the results in input
 * order. The first failure cancels the ones running, waits for their cleanup, and is thrown (later
 * errors attached to its `suppressed`); items not yet started never start.
 *
 * @example
 * ```ts
 * import { mapLimit, run, sleep } from "@keel/core";
 * const doubled = await run(() => mapLimit([1, 2, 3, 4], 2, function* (n) { yield* sleep(10); return n * 2; }));
 * console.log(doubled); // [2, 4, 6, 8]
 * ```
 * @throws `RangeError` for a `limit` that is not a whole number ≥ 1; `TypeError` for bad items or fn.
 */
export function mapLimit<T, R>(
  items: Iterable<T>,
  limit: number,
  fn: (item: T, index: number) => Operation<R>,
): Operation<R[]> {
  const list = check("mapLimit", items, limit, fn);
  return new BoundOp3(mapLimitBody<T, R>, list, limit, fn);
}

/** What a `mapLimit` run's workers share: the items, the results in input order, the next index. */
class FanOut<T, R> {
  readonly results: R[];
  nextIndex = 0;
  constructor(
    readonly list: readonly T[],
    readonly fn: (item: T, index: number) => Operation<R>,
  ) {
    this.results = new Array<R>(list.length);
  }
}

// Module-level generators, not ones made per call: each generator function gives its generators a
// hidden class of their own, and a literal with a generator method costs one per call (~400 ns).
function* mapLimitBody<T, R>(
  list: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Operation<R>,
): Generator<unknown, R[], unknown> {
  const fanOut = new FanOut(list, fn);
  // Each worker takes the next item when it is free, so at most `limit` run and order is kept.
  const workers = Array.from({ length: Math.min(limit, list.length) }, (_, k) =>
    Object.defineProperty(() => workerBody(fanOut), "name", { value: `worker${k + 1}` }),
  );
  yield* all(workers);
  return fanOut.results;
}

function* workerBody<T, R>(f: FanOut<T, R>): Generator<unknown, void, unknown> {
  while (f.nextIndex < f.list.length) {
    const i = f.nextIndex++;
    f.results[i] = yield* delegate(() => f.fn(f.list[i]!, i));
  }
}

/**
 * Like {@link mapLimit}, for effects only.
 *
 * @example
 * ```ts
 * import { forEachLimit, run, sleep } from "@keel/core";
 * await run(() => forEachLimit(["a", "b", "c"], 2, function* (s) { yield* sleep(5); console.log(s); }));
 * ```
 */
export function forEachLimit<T>(
  items: Iterable<T>,
  limit: number,
  fn: (item: T, index: number) => Operation<unknown>,
): Operation<void> {
  const list = check("forEachLimit", items, limit, fn);
  return new BoundOp3(forEachLimitBody<T>, list, limit, fn);
}

function* forEachLimitBody<T>(
  list: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Operation<unknown>,
): Generator<unknown, void, unknown> {
  yield* mapLimit(list, limit, fn);
}

/**
 * `mapLimit`, `mapLimitSettled` and `forEachLimit`: bounded fan-out over a lazily read source, with
 * `all()`'s failure semantics.
 * @module
 */

import { invalidRange, invalidType } from "../errors.js";
import { all } from "../kernel/all.js";
import { settle } from "../kernel/all-settled.js";
import { BoundOp4, nameBody } from "../kernel/bound-op.js";
import { currentTask, delegate } from "../kernel/current.js";
import type { NotAPromise } from "../kernel/not-a-promise.js";
import type { Operation } from "../kernel/operation.js";
import { checkItems, closeAfter, ItemSource, type ItemsOf } from "./item-source.js";

function check(api: string, items: unknown, limit: number, fn: unknown): void {
  checkItems(`${api}(items)`, items);
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1)
    throw invalidRange(`${api}(items, limit)`, "a whole number ≥ 1", limit);
  if (typeof fn !== "function")
    throw invalidType(`${api}(items, limit, fn)`, "a function returning an operation", fn);
}

/** What a run keeps of each item's outcome (an index into `API`). */
type Keep = 0 | 1 | 2;
const Keep = { Values: 0, Settled: 1, Nothing: 2 } as const;

/**
 * Runs `fn` over `items` with at most `limit` running at once and returns the results in input
 * order. The items are read lazily: the next one is pulled only when a worker is free, so at most
 * `limit` are pulled ahead of the ones finished, and an endless generator or an async iterable (a
 * stream, a paginated API) is read with bounded memory. The first failure cancels the ones running,
 * waits for their cleanup, and is thrown (later errors attached to its `suppressed`); no more items
 * are pulled, and the source is closed (its `return()`, so a generator's `finally` runs). An error
 * thrown by the source itself fails the fan-out the same way.
 *
 * **Cancellation**: a worker waiting for an async source's next item leaves at once; the item, if
 * it comes later, is dropped.
 *
 * @example
 * ```ts
 * import { mapLimit, run, sleep } from "@keel/core";
 * const doubled = await run(() => mapLimit([1, 2, 3, 4], 2, function* (n) { yield* sleep(10); return n * 2; }));
 * console.log(doubled); // [2, 4, 6, 8]
 * async function* ids() { for (let id = 1; id <= 3; id++) yield id; } // a paginated API, say
 * console.log(await run(() => mapLimit(ids(), 2, function* (id) { return `order ${id}`; }))); // ["order 1", "order 2", "order 3"]
 * ```
 * @throws `RangeError` for a `limit` that is not a whole number ≥ 1; `TypeError` for bad items or fn.
 */
export function mapLimit<T, R>(
  items: ItemsOf<T>,
  limit: number,
  fn: (item: T, index: number) => Operation<R>,
): Operation<R[]> & NotAPromise {
  check("mapLimit", items, limit, fn);
  return new BoundOp4(fanOutBody<T, R>, items, limit, fn, Keep.Values) as Operation<R[]> & NotAPromise;
}

/**
 * Like {@link mapLimit}, but an item that fails does not stop the others: each result is
 * `{ status: "fulfilled", value }` or `{ status: "rejected", reason }`, in input order, as
 * `Promise.allSettled` gives. A cancellation is never collected: cancelling the caller cancels the
 * running items and ends the fan-out as `mapLimit` does. A separate function rather than an option
 * of `mapLimit`: the result type differs, and the name pairs with `allSettled` as `mapLimit` with `all`.
 *
 * @example
 * ```ts
 * import { mapLimitSettled, run } from "@keel/core";
 * const results = await run(() => mapLimitSettled([1, 2, 3], 2, function* check(n) {
 *   if (n === 2) throw new Error(`item ${n} is bad`);
 *   return n * 10;
 * }));
 * console.log(results.map((r) => (r.status === "fulfilled" ? r.value : (r.reason as Error).message)));
 * // [10, "item 2 is bad", 30]
 * ```
 * @throws `RangeError` for a `limit` that is not a whole number ≥ 1; `TypeError` for bad items or fn.
 */
export function mapLimitSettled<T, R>(
  items: ItemsOf<T>,
  limit: number,
  fn: (item: T, index: number) => Operation<R>,
): Operation<PromiseSettledResult<R>[]> & NotAPromise {
  check("mapLimitSettled", items, limit, fn);
  return new BoundOp4(fanOutBody<T, R>, items, limit, fn, Keep.Settled) as Operation<
    PromiseSettledResult<R>[]
  > &
    NotAPromise;
}

/**
 * Like {@link mapLimit}, for effects only: it keeps no results, so an endless source runs in
 * constant memory.
 *
 * @example
 * ```ts
 * import { forEachLimit, run, sleep } from "@keel/core";
 * await run(() => forEachLimit(["a", "b", "c"], 2, function* (s) { yield* sleep(5); console.log(s); }));
 * ```
 * @throws `RangeError` for a `limit` that is not a whole number ≥ 1; `TypeError` for bad items or fn.
 */
export function forEachLimit<T>(
  items: ItemsOf<T>,
  limit: number,
  fn: (item: T, index: number) => Operation<unknown>,
): Operation<void> & NotAPromise {
  check("forEachLimit", items, limit, fn);
  return new BoundOp4(fanOutBody<T, unknown>, items, limit, fn, Keep.Nothing) as Operation<void> &
    NotAPromise;
}

/** What a run's workers share: the source, the function, and the results in input order. */
class FanOut<T, R> {
  readonly results: unknown[] = [];
  constructor(
    readonly source: ItemSource<T>,
    readonly fn: (item: T, index: number) => Operation<R>,
    readonly keep: Keep,
  ) {}
}

const API = ["mapLimit", "mapLimitSettled", "forEachLimit"] as const;

// Module-level generators, not ones made per call: each generator function gives its generators a
// hidden class of their own, and a literal with a generator method costs one per call (~400 ns).
function* fanOutBody<T, R>(
  items: ItemsOf<T>,
  limit: number,
  fn: (item: T, index: number) => Operation<R>,
  keep: Keep,
): Generator<unknown, unknown, unknown> {
  // The iterator is opened per run, so that the operation runs again over an array or a Set.
  const source = new ItemSource(items);
  const fanOut = new FanOut(source, fn, keep);
  // Each worker pulls the next item when it is free, so at most `limit` run and order is kept. An
  // array's length says how many workers can find work; another source's is known only by reading.
  const count = Array.isArray(items) ? Math.min(limit, items.length) : limit;
  const workers = Array.from({ length: count }, (_, k) =>
    Object.defineProperty(() => workerBody(fanOut), "name", { value: `worker${k + 1}` }),
  );
  try {
    yield* all(workers);
  } catch (e) {
    yield* closeAfter(source, e, API[keep]);
    throw e;
  }
  return keep === Keep.Nothing ? undefined : fanOut.results;
}

function* workerBody<T, R>(f: FanOut<T, R>): Generator<unknown, void, unknown> {
  const { source, results, keep } = f;
  const task = keep === Keep.Settled ? yield* currentTask("mapLimitSettled") : null;
  for (;;) {
    let item: T;
    let i: number;
    if (source.sync) {
      if (!source.pullSync()) return;
      item = source.value as T;
      i = source.pulled - 1;
    } else {
      const got = yield* source.pullAsync();
      if (got === null) return;
      item = got.value;
      i = got.index;
    }
    if (keep === Keep.Settled) {
      results[i] = yield* settle(task!, () => f.fn(item, i));
    } else {
      const value = yield* delegate(() => f.fn(item, i));
      if (keep === Keep.Values) results[i] = value;
    }
  }
}

// What an awaited one of these operations is called in its KEEL_OPERATION_AWAITED error.
nameBody(fanOutBody, "mapLimit");

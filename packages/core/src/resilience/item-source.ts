/**
 * `ItemSource`: pulls the items of an iterable or an async iterable one at a time, for the fan-out
 * and for `feed`, so that an endless generator, a stream or a paginated API is read only as fast
 * as the work takes its items.
 * @module
 */
import { invalidType } from "../errors.js";
import { isCancelled } from "../kernel/cancelled.js";
import { currentTask } from "../kernel/current.js";
import { until } from "../kernel/interop.js";

/**
 * What the fan-out and `feed` read from: a sync iterable (an array, a `Set`, a generator) or an async
 * one (an async generator, a Node stream, a paginated API).
 *
 * @example
 * ```ts
 * import { type ItemsOf, forEachLimit, run } from "@keel/core";
 * async function* pages() { for (let p = 1; p <= 3; p++) yield `page ${p}`; }
 * const sources: ItemsOf<string>[] = [["a", "b"], new Set(["c"]), pages()];
 * for (const items of sources) await run(() => forEachLimit(items, 2, function* (s) { console.log(s); }));
 * ```
 */
export type ItemsOf<T> = Iterable<T> | AsyncIterable<T>;

/** Throws a `TypeError` naming `parameter` unless `items` is iterable or async iterable. */
export function checkItems(parameter: string, items: unknown): void {
  const obj = items as { [Symbol.iterator]?: unknown; [Symbol.asyncIterator]?: unknown } | null;
  if (
    obj === null ||
    obj === undefined ||
    (typeof obj?.[Symbol.iterator] !== "function" && typeof obj?.[Symbol.asyncIterator] !== "function")
  )
    throw invalidType(parameter, "an iterable or an async iterable", items);
}

const SOURCE_DONE: IteratorResult<never, undefined> = Object.freeze({ done: true, value: undefined });

function ignore(): void {}

/**
 * One run's reading of a source. Sync items are pulled with `pullSync` (no suspension: a worker
 * reads, then runs the item, in one step); async ones with `pullAsync`, a suspension on the
 * iterator's promise. Async pulls are chained, so `next()` is never called while another call is
 * pending, whatever the iterator (an async generator queues calls itself; a hand-written one may not).
 *
 * Invariant: once `done` (exhausted, failed, or closed early) no `next()` is started again; an
 * iterator whose `next()` threw is not closed (as `for…of` does not).
 */
export class ItemSource<T> {
  /** Exhausted, failed or closed: nothing more is pulled. */
  done = false;
  /** Items pulled so far: the next item's index. */
  pulled = 0;
  readonly sync: Iterator<T> | null;
  private readonly async: AsyncIterator<T> | null;
  /** Settles when the last chained pull has; the next one starts after it. */
  private tail: Promise<unknown> = Promise.resolve();
  /** A `next()` of the async iterator has been called and has not settled. */
  private calling = false;
  /** The value of the last `pullSync` that returned true. */
  value: T | undefined = undefined;

  constructor(items: ItemsOf<T>) {
    const asyncOpen = (items as AsyncIterable<T>)[Symbol.asyncIterator];
    if (typeof asyncOpen === "function") {
      this.async = asyncOpen.call(items);
      this.sync = null;
    } else {
      this.sync = (items as Iterable<T>)[Symbol.iterator]();
      this.async = null;
    }
  }

  /** Takes the next item into `value`; false when there is none. For a sync source only. */
  pullSync(): boolean {
    if (this.done) return false;
    let r: IteratorResult<T>;
    try {
      r = this.sync!.next();
    } catch (e) {
      this.done = true;
      throw e;
    }
    if (r.done) {
      this.done = true;
      return false;
    }
    this.value = r.value;
    this.pulled++;
    return true;
  }

  /**
   * `yield* source.pullAsync()`: the next item and its index, or null when there is none. A
   * cancellation abandons the wait (the item, if it comes, is dropped with the run).
   */
  *pullAsync(): Generator<unknown, { value: T; index: number } | null, unknown> {
    if (this.done) return null;
    const next = this.tail.then(() => this.callNext());
    this.tail = next.then(ignore, ignore);
    let r: IteratorResult<T>;
    try {
      r = yield* until(next);
    } catch (e) {
      if (!isCancelled(e)) this.done = true;
      throw e;
    }
    if (r.done) {
      this.done = true;
      return null;
    }
    return { value: r.value, index: this.pulled++ };
  }

  private callNext(): IteratorResult<T> | Promise<IteratorResult<T>> {
    if (this.done) return SOURCE_DONE;
    this.calling = true;
    const settled = () => {
      this.calling = false;
    };
    const p = Promise.resolve(this.async!.next());
    p.then(settled, settled);
    return p;
  }

  /**
   * `yield* source.close()`: ends reading early (an error or a cancellation ended the work) by
   * calling the iterator's `return()`, so a generator's `finally` runs. An async `return()` is
   * awaited unless a `next()` is still pending: that one may never settle, and the close must not
   * hang on it, so `return()` is then called after it settles, without waiting.
   */
  *close(): Generator<unknown, void, unknown> {
    if (this.done) return;
    this.done = true;
    if (this.sync) {
      this.sync.return?.();
      return;
    }
    const it = this.async!;
    if (typeof it.return !== "function") return;
    if (this.calling) {
      this.tail.then(() => it.return!()).then(ignore, ignore);
      return;
    }
    yield* until(Promise.resolve(it.return()));
  }
}

/**
 * `yield* closeAfter(source, primary, api)` where `primary` ended the work early: closes the source;
 * an error from `return()` joins `primary`'s `suppressed`, or, when `primary` is a cancellation,
 * replaces it (as an error thrown by a `finally` during cancellation does).
 */
export function* closeAfter<T>(
  source: ItemSource<T>,
  primary: unknown,
  api: string,
): Generator<unknown, void, unknown> {
  try {
    yield* source.close();
  } catch (closeError) {
    if (isCancelled(primary)) throw closeError;
    const task = yield* currentTask(api);
    task.suppress(primary, closeError, `${api}: the source's return()`);
  }
}

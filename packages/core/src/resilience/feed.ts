/**
 * `feed`: pipes an iterable or an async iterable into a channel, with the channel's backpressure.
 * @module
 */

import { invalidType } from "../errors.js";
import { BoundOp3, nameBody } from "../kernel/bound-op.js";
import type { NotAPromise } from "../kernel/not-a-promise.js";
import type { Operation } from "../kernel/operation.js";
import type { Channel } from "./channel.js";
import { checkItems, closeAfter, ItemSource, type ItemsOf } from "./item-source.js";

/**
 * How {@link feed} ends.
 *
 * @example
 * ```ts
 * import { createChannel, type FeedOptions, feed, run, spawn } from "@keel/core";
 * const ch = createChannel<string>({ capacity: 4 });
 * const keepOpen: FeedOptions = { close: false }; // two producers share the channel
 * const got = await run(function* () {
 *   yield* spawn(function* producers() {
 *     yield* feed(ch, ["a", "b"], keepOpen);
 *     yield* feed(ch, ["c"], keepOpen);
 *     ch.close(); // the last one out closes it
 *   });
 *   const seen: string[] = [];
 *   for (let r = yield* ch.next(); !r.done; r = yield* ch.next()) seen.push(r.value);
 *   return seen;
 * });
 * console.log(got); // ["a", "b", "c"]
 * ```
 */
export interface FeedOptions {
  /** Close the channel when the items run out (default true); false when other producers share it. */
  close?: boolean;
}

/**
 * Sends every item of `items` to `channel` in order and returns how many it sent. The next item is
 * pulled only once the channel took the previous one, so a stream or a paginated API is read no
 * faster than the consumer drains the channel (at most the channel's capacity ahead).
 *
 * - When the items run out it closes the channel (unless `close: false`), so the consumer's
 *   `next()` loop ends.
 * - An error from the items, or a cancellation, ends it without closing the channel (a consumer must
 *   not mistake a broken stream for a finished one; the error goes up the task tree), and the source
 *   is closed (its `return()`, so a generator's `finally` runs).
 * - When the consumer closes the channel, it stops quietly: it closes the source and returns the
 *   count sent. The item in hand is dropped.
 *
 * @example
 * ```ts
 * import { createChannel, feed, run, sleep, spawn } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * async function* lines() { for (const line of ["a", "b", "c"]) yield line; } // a file, a socket
 * const clock = createVirtualClock();
 * const ch = createChannel<string>({ capacity: 1 });
 * const seen = await run(function* () {
 *   yield* spawn(() => feed(ch, lines()));
 *   const out: string[] = [];
 *   for (let r = yield* ch.next(); !r.done; r = yield* ch.next()) {
 *     yield* sleep(10); // a slow consumer: the feed waits for it
 *     out.push(`${r.value}@${clock.now()}`);
 *   }
 *   return out;
 * }, { clock });
 * console.log(seen); // ["a@10", "b@20", "c@30"]
 * ```
 * @throws `TypeError` for a `channel` without `send`, or `items` that are not iterable.
 */
export function feed<T>(
  channel: Channel<T>,
  items: ItemsOf<T>,
  options: FeedOptions = {},
): Operation<number> & NotAPromise {
  if (typeof (channel as Channel<T> | null)?.send !== "function")
    throw invalidType("feed(channel)", "a channel", channel);
  checkItems("feed(channel, items)", items);
  if (typeof options !== "object" || options === null)
    throw invalidType("feed(channel, items, options)", "an object", options);
  const close = options.close ?? true;
  if (typeof close !== "boolean") throw invalidType("feed(channel, items, { close })", "a boolean", close);
  return new BoundOp3(feedBody<T>, channel, items, close);
}

function* feedBody<T>(
  channel: Channel<T>,
  items: ItemsOf<T>,
  close: boolean,
): Generator<unknown, number, unknown> {
  const source = new ItemSource(items);
  let sent = 0;
  try {
    for (;;) {
      let value: T;
      if (source.sync) {
        if (!source.pullSync()) break;
        value = source.value as T;
      } else {
        const got = yield* source.pullAsync();
        if (got === null) break;
        value = got.value;
      }
      try {
        yield* channel.send(value);
      } catch (e) {
        // Closed before or while this send waited for room: the consumer is done.
        if (!channel.closed || (e as { code?: unknown } | null)?.code !== "KEEL_CHANNEL_CLOSED") throw e;
        yield* source.close();
        return sent;
      }
      sent++;
    }
  } catch (e) {
    yield* closeAfter(source, e, "feed");
    throw e;
  }
  if (close) channel.close();
  return sent;
}

// What an awaited one of these operations is called in its KEEL_OPERATION_AWAITED error.
nameBody(feedBody, "feed");

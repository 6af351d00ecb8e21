/**
 * `createChannel`: a bounded FIFO queue between tasks, with backpressure.
 * @module
 */

import { invalidRange, KeelError } from "../errors.js";
import { BoundOp1 } from "../kernel/bound-op.js";
import { currentTask } from "../kernel/current.js";
import type { Operation } from "../kernel/operation.js";
import { park } from "./park.js";

/**
 * A bounded channel.
 *
 * @example
 * ```ts
 * import { type Channel, createChannel, run, sleep, spawn } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * function* produce(out: Channel<string>) {
 *   for (const job of ["a", "b", "c"]) yield* out.send(job); // waits while the channel is full
 *   out.close();
 * }
 * const clock = createVirtualClock();
 * const jobs = createChannel<string>({ capacity: 1, name: "jobs" });
 * const done = await run(function* () {
 *   yield* spawn(() => produce(jobs));
 *   const seen: string[] = [];
 *   for (let r = yield* jobs.next(); !r.done; r = yield* jobs.next()) {
 *     yield* sleep(10);
 *     seen.push(`${r.value}@${clock.now()}`);
 *   }
 *   return seen;
 * }, { clock });
 * console.log(done, jobs.closed, jobs.size); // ["a@10", "b@20", "c@30"] true 0
 * ```
 */
export interface Channel<T> {
  readonly capacity: number;
  /** Values buffered now. */
  readonly size: number;
  readonly closed: boolean;
  /** Senders waiting for room, receivers waiting for a value. */
  readonly waiting: { readonly senders: number; readonly receivers: number };
  /** Puts a value; suspends while the channel is full. Throws `KEEL_CHANNEL_CLOSED` once closed. */
  send(value: T): Operation<void>;
  /** Takes the next value; suspends while empty. Returns `{ done: true }` once closed and drained. */
  next(): Operation<IteratorResult<T, undefined>>;
  /** Takes the next value; throws `KEEL_CHANNEL_CLOSED` once closed and drained. */
  receive(): Operation<T>;
  /** No more sends; buffered values can still be received; waiting senders fail. */
  close(): void;
}

interface PendingSend<T> {
  readonly value: T;
  accepted: boolean;
  failed: boolean;
  wake: (() => void) | null;
}

interface PendingReceive {
  /** Woken because a buffered value (or the close) is there for it; it takes it when it resumes. */
  notified: boolean;
  wake: (() => void) | null;
}

/**
 * The error for a send to a closed channel, or a `receive()` from a closed and drained one.
 *
 * @example
 * ```ts
 * import { ChannelClosedError, createChannel, run } from "@keel/core";
 * const ch = createChannel<number>({ capacity: 1 });
 * ch.close();
 * try {
 *   await run(() => ch.send(1));
 * } catch (e) {
 *   // KEEL_CHANNEL_CLOSED channel.send(): the channel is closed
 *   if (e instanceof ChannelClosedError) console.log(e.code, e.message);
 * }
 * ```
 */
export class ChannelClosedError extends KeelError {
  constructor(message: string) {
    super("KEEL_CHANNEL_CLOSED", message);
    this.name = "ChannelClosedError";
  }
}

/**
 * Creates a channel that buffers up to `capacity` values: `send` suspends while it is full (that is
 * the backpressure), `next`/`receive` while it is empty. Values come out in order; waiting senders and
 * receivers are served in order. A cancelled waiter leaves the queue at once, and a value handed to a
 * receiver that is cancelled in the same instant goes back to the front, never lost.
 *
 * @example
 * ```ts
 * import { createChannel, run, spawn } from "@keel/core";
 * const ch = createChannel<number>({ capacity: 2 });
 * const sum = await run(function* pipeline() {
 *   yield* spawn(function* producer() { for (let i = 1; i <= 5; i++) yield* ch.send(i); ch.close(); });
 *   let total = 0;
 *   for (let r = yield* ch.next(); !r.done; r = yield* ch.next()) total += r.value;
 *   return total;
 * });
 * console.log(sum); // 15
 * ```
 * @throws `RangeError` naming `capacity` unless it is a whole number ≥ 1.
 */
export function createChannel<T>(options: { capacity: number; name?: string }): Channel<T> {
  const capacity = options?.capacity;
  if (typeof capacity !== "number" || !Number.isInteger(capacity) || capacity < 1) {
    throw invalidRange("createChannel({ capacity })", "a whole number ≥ 1", capacity);
  }
  const name = options.name ?? "channel";
  const buffer: T[] = [];
  const senders: PendingSend<T>[] = [];
  const receivers: PendingReceive[] = [];
  let closed = false;

  // Invariant: buffer.length ≤ capacity. A value stays in the buffer until a receiver takes it when
  // it resumes, so a receiver cancelled after being woken loses nothing and reorders nothing.
  const pump = () => {
    for (;;) {
      let notified = 0;
      for (const r of receivers) {
        if (r.notified) {
          notified++;
          continue;
        }
        if (notified >= buffer.length && !closed) break;
        r.notified = true;
        notified++;
        r.wake?.();
      }
      const s = senders[0];
      if (!s || buffer.length >= capacity) return;
      senders.shift();
      buffer.push(s.value);
      s.accepted = true;
      s.wake?.();
    }
  };

  // One operation per channel for `next()` and one for `receive()`: operations are re-runnable, and
  // a literal with a generator method per call costs a generator function each (~400 ns).
  const nextOp: Operation<IteratorResult<T, undefined>> = {
    *[Symbol.iterator]() {
      const task = yield* currentTask(`${name}.next()`);
      task.checkpoint();
      // A newcomer takes directly only when nobody queues before it; a woken receiver takes first.
      let woken = false;
      for (;;) {
        if ((woken || receivers.length === 0) && buffer.length > 0) {
          const value = buffer.shift()!;
          pump();
          return { done: false, value };
        }
        if ((woken || receivers.length === 0) && closed) return { done: true, value: undefined };
        const p: PendingReceive = { notified: false, wake: null };
        if (woken) receivers.unshift(p);
        else receivers.push(p);
        pump();
        yield park(
          p,
          () => p.notified,
          () => {
            const i = receivers.indexOf(p);
            if (i >= 0) receivers.splice(i, 1);
            // Woken but leaving without its value (cancelled): offer it to the next receiver.
            if (p.notified) queueMicrotask(pump);
          },
          () => `${name}: receive, empty (${receivers.length} receiving)`,
        );
        woken = true;
      }
    },
  };
  const next = (): Operation<IteratorResult<T, undefined>> => nextOp;
  /** `send(value)`'s body: one generator function per channel, not per call. */
  function* sendBody(value: T): Generator<unknown, void, unknown> {
    const task = yield* currentTask(`${name}.send()`);
    task.checkpoint();
    if (closed) throw new ChannelClosedError(`${name}.send(): the channel is closed`);
    if (senders.length === 0 && buffer.length < capacity) {
      buffer.push(value);
      pump();
      return;
    }
    const s: PendingSend<T> = { value, accepted: false, failed: false, wake: null };
    senders.push(s);
    yield park(
      s,
      () => s.accepted || s.failed,
      () => {
        const i = senders.indexOf(s);
        if (i >= 0) senders.splice(i, 1);
      },
      () => `${name}: send, full (${buffer.length}/${capacity}, ${senders.length} sending)`,
    );
    if (s.failed)
      throw new ChannelClosedError(`${name}.send(): the channel was closed while waiting for room`);
  }
  const receiveOp: Operation<T> = {
    *[Symbol.iterator]() {
      const r = yield* nextOp;
      if (r.done) throw new ChannelClosedError(`${name}.receive(): the channel is closed and drained`);
      return r.value;
    },
  };

  return {
    capacity,
    get size() {
      return buffer.length;
    },
    get closed() {
      return closed;
    },
    get waiting() {
      return { senders: senders.length, receivers: receivers.length };
    },
    send(value: T): Operation<void> {
      return new BoundOp1(sendBody, value);
    },
    next,
    receive(): Operation<T> {
      return receiveOp;
    },
    close() {
      if (closed) return;
      closed = true;
      for (const s of senders.splice(0)) {
        s.failed = true;
        s.wake?.();
      }
      pump();
    },
  };
}

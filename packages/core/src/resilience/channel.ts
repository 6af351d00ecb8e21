/**
 * `createChannel`: a bounded FIFO queue between tasks, with backpressure.
 * @module
 */

import { invalidRange, KeelError } from "../errors.js";
import { BoundOp1, BoundOp2, nameBody } from "../kernel/bound-op.js";
import { currentTask } from "../kernel/current.js";
import { hostTimers } from "../kernel/host.js";
import type { NotAPromise } from "../kernel/not-a-promise.js";
import type { Operation } from "../kernel/operation.js";
import type { TaskImpl } from "../kernel/task.js";
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
  /**
   * Puts a value if there is room now, without waiting: for callback code outside any task (an event
   * handler, a stream's `data`). Returns whether it took the value; false while the channel is full
   * (or senders queue before it). Throws `KEEL_CHANNEL_CLOSED` once closed, as `send` does: a value
   * sent after the close would be lost without a word.
   */
  trySend(value: T): boolean;
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
  return new ChannelImpl<T>(capacity, options.name ?? "channel");
}

/**
 * A channel's state. Its operations are module-level generators bound to it, not generator
 * functions made per channel (each gives its generators a hidden class of their own); the public
 * functions are arrow properties, so that they can be passed around detached (`values.map(ch.send)`).
 */
class ChannelImpl<T> implements Channel<T> {
  /** Invariant: buffer.length ≤ capacity. */
  readonly buffer: T[] = [];
  readonly senders: PendingSend<T>[] = [];
  readonly receivers: PendingReceive[] = [];
  isClosed = false;
  // One operation per channel for `next()` and one for `receive()`: operations are re-runnable.
  private readonly nextOp: Operation<IteratorResult<T, undefined>> & NotAPromise = new BoundOp1(
    nextBody<T>,
    this,
  );
  private readonly receiveOp: Operation<T> & NotAPromise = new BoundOp1(receiveBody<T>, this);

  constructor(
    readonly capacity: number,
    readonly name: string,
  ) {}

  get size(): number {
    return this.buffer.length;
  }
  get closed(): boolean {
    return this.isClosed;
  }
  get waiting(): { senders: number; receivers: number } {
    return { senders: this.senders.length, receivers: this.receivers.length };
  }

  readonly send = (value: T): Operation<void> => new BoundOp2(sendBody<T>, this, value);
  readonly trySend = (value: T): boolean => {
    if (this.isClosed) throw new ChannelClosedError(`${this.name}.trySend(): the channel is closed`);
    if (this.senders.length > 0 || this.buffer.length >= this.capacity) return false;
    this.buffer.push(value);
    this.pump();
    return true;
  };
  readonly next = (): Operation<IteratorResult<T, undefined>> => this.nextOp;
  readonly receive = (): Operation<T> => this.receiveOp;
  /** Reports the depth after a send or a receive; called only while someone listens to events. */
  report(task: TaskImpl<unknown>, op: "send" | "receive"): void {
    const { name, capacity, buffer, senders, receivers } = this;
    task.emit({
      type: "channel:depth",
      name,
      op,
      size: buffer.length,
      capacity,
      senders: senders.length,
      receivers: receivers.length,
    });
  }
  readonly close = (): void => {
    if (this.isClosed) return;
    this.isClosed = true;
    for (const s of this.senders.splice(0)) {
      s.failed = true;
      s.wake?.();
    }
    this.pump();
  };

  /**
   * Wakes the receivers that a buffered value (or the close) is there for, then moves waiting
   * senders' values in while there is room. A value stays in the buffer until a receiver takes it
   * when it resumes, so a receiver cancelled after being woken loses nothing and reorders nothing.
   * An arrow: it is also queued as a microtask.
   */
  readonly pump = (): void => {
    const { buffer, senders, receivers } = this;
    for (;;) {
      let notified = 0;
      for (const r of receivers) {
        if (r.notified) {
          notified++;
          continue;
        }
        if (notified >= buffer.length && !this.isClosed) break;
        r.notified = true;
        notified++;
        r.wake?.();
      }
      const s = senders[0];
      if (!s || buffer.length >= this.capacity) return;
      senders.shift();
      buffer.push(s.value);
      s.accepted = true;
      s.wake?.();
    }
  };
}

function* nextBody<T>(ch: ChannelImpl<T>): Generator<unknown, IteratorResult<T, undefined>, unknown> {
  const task = yield* currentTask(`${ch.name}.next()`);
  task.checkpoint();
  const { buffer, receivers } = ch;
  // A newcomer takes directly only when nobody queues before it; a woken receiver takes first.
  let woken = false;
  for (;;) {
    if ((woken || receivers.length === 0) && buffer.length > 0) {
      const value = buffer.shift()!;
      ch.pump();
      if (task.runtime.listening) ch.report(task, "receive");
      return { done: false, value };
    }
    if ((woken || receivers.length === 0) && ch.isClosed) return { done: true, value: undefined };
    const p: PendingReceive = { notified: false, wake: null };
    if (woken) receivers.unshift(p);
    else receivers.push(p);
    ch.pump();
    yield park(
      p,
      () => p.notified,
      () => {
        const i = receivers.indexOf(p);
        if (i >= 0) receivers.splice(i, 1);
        // Woken but leaving without its value (cancelled): offer it to the next receiver.
        if (p.notified) hostTimers.queueMicrotask(ch.pump);
      },
      () => `${ch.name}: receive, empty (${receivers.length} receiving)`,
    );
    woken = true;
  }
}

function* sendBody<T>(ch: ChannelImpl<T>, value: T): Generator<unknown, void, unknown> {
  const task = yield* currentTask(`${ch.name}.send()`);
  task.checkpoint();
  if (ch.isClosed) throw new ChannelClosedError(`${ch.name}.send(): the channel is closed`);
  const { buffer, senders } = ch;
  if (senders.length === 0 && buffer.length < ch.capacity) {
    buffer.push(value);
    ch.pump();
    if (task.runtime.listening) ch.report(task, "send");
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
    () => `${ch.name}: send, full (${buffer.length}/${ch.capacity}, ${senders.length} sending)`,
  );
  if (s.failed)
    throw new ChannelClosedError(`${ch.name}.send(): the channel was closed while waiting for room`);
  if (task.runtime.listening) ch.report(task, "send");
}

function* receiveBody<T>(ch: ChannelImpl<T>): Generator<unknown, T, unknown> {
  const r = yield* ch.next();
  if (r.done) throw new ChannelClosedError(`${ch.name}.receive(): the channel is closed and drained`);
  return r.value;
}

// What an awaited one of these operations is called in its KEEL_OPERATION_AWAITED error.
nameBody(nextBody, "channel.next");
nameBody(receiveBody, "channel.receive");
nameBody(sendBody, "channel.send");

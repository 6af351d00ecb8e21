/**
 * `createSemaphore`: a fixed number of permits, handed out in FIFO order.
 * @module
 */

import { checkOptions, invalidRange, invalidType } from "../errors.js";
import { BoundOp1, BoundOp2, nameBody } from "../kernel/bound-op.js";
import { taskOf } from "../kernel/current.js";
import type { NotAPromise } from "../kernel/not-a-promise.js";
import {
  CURRENT_TASK,
  checkOp,
  type Op,
  type Operation,
  type Outcome,
  SuspensionClass,
  suspensionClass,
  type WaitDetail,
  type Waiter,
} from "../kernel/operation.js";
import { shapes } from "../kernel/shapes.js";
import { runningTask, type TaskImpl } from "../kernel/task.js";
import { type PermitPool, UseIterator } from "./semaphore-use.js";

/**
 * A held permit.
 *
 * @example
 * ```ts
 * import { createSemaphore, type Permit, run, sleep, spawn } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const clock = createVirtualClock();
 * const pool = createSemaphore(1, { name: "pool" });
 * await run(function* () {
 *   const permit: Permit = yield* pool.acquire();
 *   const second = yield* spawn(function* second() {
 *     yield* pool.acquire(); // released when this task ends
 *     console.log(`second got the permit at ${clock.now()}`); // second got the permit at 30
 *   });
 *   yield* sleep(30);
 *   permit.release(); // early: this scope goes on without it
 *   yield* second;
 * }, { clock });
 * console.log(pool.available); // 1
 * ```
 */
export interface Permit {
  /** Gives the permit back early; idempotent. It is given back anyway when the holder's scope ends. */
  release(): void;
}

/**
 * A counting semaphore with FIFO fairness.
 *
 * @example
 * ```ts
 * import { all, createSemaphore, run, type Semaphore, sleep } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const clock = createVirtualClock();
 * const db: Semaphore = createSemaphore(2, { name: "db" });
 * const startedAt: number[] = [];
 * const query = () => db.use(function* query() { startedAt.push(clock.now()); yield* sleep(100); });
 * await run(() => all([query, query, query, query, query]), { clock });
 * console.log(startedAt, db.available, db.waiting); // [0, 0, 100, 100, 200] 2 0
 * ```
 */
export interface Semaphore {
  readonly name: string;
  readonly permits: number;
  /** Permits free now. Invariant: 0 ≤ available ≤ permits, and 0 while anyone waits. */
  readonly available: number;
  /** Tasks waiting for a permit. */
  readonly waiting: number;
  /**
   * Waits for a permit that belongs to the caller's current scope: it is released when that scope
   * ends (value, error, cancellation or abandonment), or earlier by `permit.release()`.
   */
  acquire(): Operation<Permit>;
  /** Acquires, runs `op` in its own scope, and releases once `op` and its children have stopped. */
  use<T>(op: Op<T>): Operation<T>;
}

const GRANTED: Outcome<void> = { ok: true, value: undefined };

/**
 * A task waiting for a permit, and the suspension it waits at (one object: a queue of waiting users
 * is the case that matters). Invariant: `granted` and `gone` are never both true.
 */
class QueuedTask extends SuspensionClass<void> {
  declare readonly interruptible: "normal";
  granted = false;
  /** Left the queue (cancelled) before being granted: skipped when a permit is handed on. */
  gone = false;
  /** The task's side of the wait, while it waits. */
  wake: Waiter<void> | null = null;
  /** The waiting task and when it began waiting, kept only while someone listens to events. */
  task: TaskImpl<unknown> | null = null;
  since = 0;
  constructor(readonly books: SemaphoreBooks) {
    super();
    shapes.semaphoreWait = this;
  }
  get description(): string {
    return `semaphore ${this.books.name}: ${this.books.waitingCount} waiting`;
  }
  waitDetail(): WaitDetail {
    const { name, waitingCount } = this.books;
    return { kind: "semaphore", name, position: this.books.positionOf(this), waiting: waitingCount };
  }
  enterWith(waiter: Waiter<void>): (() => void) | undefined {
    if (this.granted) {
      waiter.resolve(GRANTED);
      return undefined;
    }
    this.wake = waiter;
    // One shared teardown: the runtime calls it with this wait as `this`.
    return leaveQueue;
  }
}
suspensionClass(QueuedTask, "normal");

/** A waiter's teardown (with the waiter as `this`): leaves the queue unless already granted. */
function leaveQueue(this: QueuedTask): void {
  this.wake = null;
  if (this.granted || this.gone) return;
  this.gone = true;
  this.books.left();
}

/**
 * Creates a semaphore with `permits` permits.
 *
 * A permit is released only when the holder's work has really stopped, after its cleanup, on every
 * path. A releaser hands its permit straight to the first waiter, so nobody jumps the queue.
 * Cancelling a waiter removes it from the queue at once; a grant that meets a cancellation in the same
 * instant is passed on, never lost or duplicated.
 *
 * **Cancellation** and **Time**: the wait is a suspension point (`semaphore db: 3 waiting`), bounded
 * by the deadline like every other.
 *
 * @example
 * ```ts
 * import { all, createSemaphore, run, sleep } from "@keel/core";
 * const db = createSemaphore(2, { name: "db" });
 * await run(() => all([1, 2, 3].map((n) => () => db.use(function* query() { yield* sleep(10); return n; }))));
 * console.log(db.available); // 2
 * ```
 * @throws `RangeError` naming `permits` unless it is a whole number ≥ 1.
 */
export function createSemaphore(permits: number, options: { name?: string } = {}): Semaphore {
  if (typeof permits !== "number" || !Number.isInteger(permits) || permits < 1) {
    throw invalidRange("createSemaphore(permits)", "a whole number ≥ 1", permits);
  }
  const name = checkOptions("createSemaphore(permits, options)", options)?.name;
  if (name !== undefined && typeof name !== "string")
    throw invalidType("createSemaphore(permits, { name })", "a string", name);
  return new SemaphoreImpl(permits, name ?? "semaphore");
}

/** What a queued waiter reads for its description and tells when it leaves. */
interface SemaphoreBooks {
  readonly name: string;
  readonly waitingCount: number;
  /** 1-based place of a waiter in the queue, gone entries not counted (for a snapshot only: O(n)). */
  positionOf(waiter: QueuedTask): number;
  /** A waiter not yet granted has left the queue (cancelled). */
  left(): void;
}

/**
 * Gone entries that may stay in the queue before it is purged, when they are also more than half of
 * it: a purge copies the live entries, so its cost is paid for by the gone ones it drops.
 */
const PURGE_MIN_GONE = 32;

/**
 * The semaphore's state. Its operations are module-level generator functions bound to it, not
 * functions made per semaphore: V8 gives each generator function its own map for the generators it
 * makes, so per-instance ones would send the kernel's resume path a new map for every semaphore
 * (and throw its optimized code away once the old one is collected).
 */
class SemaphoreImpl implements Semaphore, SemaphoreBooks, PermitPool {
  readonly acquireLabel: string;
  readonly useLabel: string;
  /** Invariant: 0 ≤ free ≤ permits, and 0 while anyone waits. */
  free: number;
  /**
   * A FIFO as an array with a head index (shift is O(n)); cancelled waiters are marked gone and
   * skipped rather than spliced out, and purged once they are more than half of the queue, so that
   * waiters that gave up are not kept while a permit is held. Invariants: `waitingCount` counts the
   * waiters from `head` on that are not gone, `goneCount` those that are.
   */
  queue: QueuedTask[] = [];
  head = 0;
  waitingCount = 0;
  goneCount = 0;
  /** Hands a permit back: to the first waiter not gone, else to the pool. Bound once: a frame's `own`. */
  readonly giveBack = (): void => {
    while (this.head < this.queue.length) {
      const next = this.queue[this.head++]!;
      if (next.gone) {
        this.goneCount--;
        continue;
      }
      this.waitingCount--;
      next.granted = true;
      if (next.task) this.report(next.task, next.since);
      next.wake?.resolve(GRANTED);
      this.compact();
      return;
    }
    this.compact();
    this.free = Math.min(this.permits, this.free + 1);
  };

  constructor(
    readonly permits: number,
    readonly name: string,
  ) {
    shapes.semaphore = this;
    this.free = permits;
    this.acquireLabel = `semaphore ${name}: acquire()`;
    this.useLabel = `semaphore ${name}: use(op)`;
  }

  get available(): number {
    return this.free;
  }

  get waiting(): number {
    return this.waitingCount;
  }

  // Arrow properties, not methods: `items.map(db.use)` and `const { acquire } = db` keep working.
  readonly acquire = (): Operation<Permit> => new BoundOp1(acquireBody, this);

  readonly use = <T>(op: Op<T>): Operation<T> & NotAPromise => {
    checkOp("semaphore.use(op)", op);
    return new BoundOp2(useBody, this, op) as Operation<T> & NotAPromise;
  };

  positionOf(waiter: QueuedTask): number {
    let position = 0;
    for (let i = this.head; i < this.queue.length; i++) {
      const entry = this.queue[i]!;
      if (entry.gone) continue;
      position++;
      if (entry === waiter) return position;
    }
    return 0;
  }

  /** Takes a free permit at once when nobody queues; otherwise queues and returns the wait. */
  enqueueOrTake(): QueuedTask | null {
    if (this.free > 0 && this.waitingCount === 0) {
      this.free--;
      return null;
    }
    const waiter = new QueuedTask(this);
    this.queue.push(waiter);
    this.waitingCount++;
    const task = runningTask();
    if (task?.runtime.listening) {
      waiter.task = task;
      waiter.since = task.clock.now();
      task.emit({ type: "semaphore:wait", name: this.name, waiting: this.waitingCount });
    }
    return waiter;
  }

  /** A queued task got its permit: how long it waited, and who still waits. */
  private report(task: TaskImpl<unknown>, since: number): void {
    const waitedMs = task.clock.now() - since;
    task.emit({ type: "semaphore:acquire", name: this.name, waitedMs, waiting: this.waitingCount });
  }

  left(): void {
    this.waitingCount--;
    if (++this.goneCount >= PURGE_MIN_GONE && this.goneCount > this.waitingCount) this.purge();
  }

  /** Drops the gone entries: amortized O(1) per waiter that left, and none of it on `giveBack`. */
  private purge(): void {
    const queue = this.queue;
    const live: QueuedTask[] = [];
    for (let i = this.head; i < queue.length; i++) if (!queue[i]!.gone) live.push(queue[i]!);
    this.queue = live;
    this.head = 0;
    this.goneCount = 0;
  }

  private compact(): void {
    if (this.head === this.queue.length) {
      this.queue = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
  }
}

/** Waits at `waiter`; a grant that meets a cancellation in the same instant is passed on, never lost. */
function* waitForPermit(sem: SemaphoreImpl, waiter: QueuedTask): Generator<unknown, void, unknown> {
  try {
    yield waiter;
  } catch (e) {
    if (waiter.granted) sem.giveBack();
    throw e;
  }
}

function* acquireBody(sem: SemaphoreImpl): Generator<unknown, Permit, unknown> {
  const task = runningTask() ?? taskOf(yield CURRENT_TASK, sem.acquireLabel);
  task.checkpoint();
  const waiter = sem.enqueueOrTake();
  if (waiter) yield* waitForPermit(sem, waiter);
  let held = true;
  const release = () => {
    if (!held) return;
    held = false;
    sem.giveBack();
  };
  const off = task.top.onExit(release);
  return {
    release() {
      off();
      release();
    },
  };
}

/** `use(op)`'s body (see {@link UseIterator}). */
function useBody<T>(sem: SemaphoreImpl, op: Op<T>): UseIterator<T> {
  return new UseIterator(sem, op);
}

// What an awaited one of these operations is called in its KEEL_OPERATION_AWAITED error.
nameBody(acquireBody, "semaphore.acquire");
nameBody(useBody, "semaphore.use");

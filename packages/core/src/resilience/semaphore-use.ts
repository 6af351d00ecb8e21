/**
 * `semaphore.use(op)`'s iterator: acquire, run `op` in a scope that owns the permit, release at the
 * scope's exit.
 *
 * Written as an iterator, not a generator: a queue of 10k waiting users is the case that matters,
 * and a generator for this body holds a register file of about 160 bytes per waiting user on top of
 * its object, and allocates an `Outcome` and a delegation object per use. This class is one object
 * per use, and passes `op`'s own steps through unchanged.
 * @module
 */
import { taskOf } from "../kernel/current.js";
import type { Frame } from "../kernel/frame.js";
import { exitFrame } from "../kernel/frame-exit.js";
import {
  ASK_TASK,
  type Instruction,
  iterate,
  type Op,
  type Outcome,
  type Suspension,
} from "../kernel/operation.js";
import { shapes } from "../kernel/shapes.js";
import { runningTask, type TaskImpl } from "../kernel/task.js";

/** What `use` needs of its semaphore. */
export interface PermitPool {
  readonly useLabel: string;
  /** Hands a permit back (to the first waiter, else to the pool); the use frame's own resource. */
  readonly giveBack: () => void;
  /** Takes a free permit at once (null), or queues the caller and returns the wait. */
  enqueueOrTake(): (Suspension<void> & { readonly granted: boolean }) | null;
}

// Steps. Invariant: `waiter` is set only in WAITING; `frame` from RUNNING on; `inner` is `op`'s
// iterator in RUNNING and the scope exit's in EXITING.
const START = 0;
const ASKED = 1;
const WAITING = 2;
const RUNNING = 3;
const EXITING = 4;
const DONE = 5;

export class UseIterator<T> implements Iterator<unknown, T, unknown> {
  private step = START;
  private task: TaskImpl<unknown> | null = null;
  private waiter: (Suspension<void> & { readonly granted: boolean }) | null = null;
  private frame: Frame | null = null;
  private inner: Iterator<unknown, unknown, unknown> | null = null;

  constructor(
    private readonly pool: PermitPool,
    private readonly op: Op<T>,
  ) {
    shapes.useIterator = this;
  }

  next(answer?: unknown): IteratorResult<unknown, T> {
    switch (this.step) {
      case START: {
        const task = runningTask();
        if (task !== null) return this.begin(task);
        this.step = ASKED;
        return ASK_TASK;
      }
      case ASKED:
        return this.begin(taskOf(answer, this.pool.useLabel));
      case WAITING:
        return this.enter();
      case RUNNING:
        return this.resume(true, answer);
      case EXITING:
        return this.exitStep(true, answer);
      default:
        return { done: true, value: answer as T };
    }
  }

  throw(error?: unknown): IteratorResult<unknown, T> {
    switch (this.step) {
      case WAITING:
        this.step = DONE;
        // Granted in the same instant as the cancellation: pass the permit on, never lose it.
        if (this.waiter!.granted) this.pool.giveBack();
        this.waiter = null;
        throw error;
      case RUNNING:
        return this.resume(false, error);
      case EXITING:
        return this.exitStep(false, error);
      default:
        this.step = DONE;
        throw error;
    }
  }

  /** As a generator's `return` inside `yield*`: closes `op`'s iterator, then finishes. */
  return(value?: unknown): IteratorResult<unknown, T> {
    const it = this.inner;
    this.step = DONE;
    this.inner = null;
    it?.return?.(value);
    return { done: true, value: value as T };
  }

  private begin(task: TaskImpl<unknown>): IteratorResult<unknown, T> {
    this.task = task;
    this.step = DONE; // until the permit is ours: a checkpoint that throws ends the use
    task.checkpoint();
    const waiter = this.pool.enqueueOrTake();
    if (waiter === null) return this.enter();
    this.waiter = waiter;
    this.step = WAITING;
    return { done: false, value: waiter };
  }

  /** The permit is held: it belongs to a scope around `op`, given back at the scope's exit. */
  private enter(): IteratorResult<unknown, T> {
    this.waiter = null;
    const frame = this.task!.pushFrame("scoped", this.pool.useLabel);
    frame.own = this.pool.giveBack;
    this.frame = frame;
    this.step = RUNNING;
    try {
      this.inner = iterate(this.op);
    } catch (error) {
      return this.exit({ ok: false, error });
    }
    return this.resume(true, undefined);
  }

  private resume(ok: boolean, value: unknown): IteratorResult<unknown, T> {
    let r: IteratorResult<unknown, unknown>;
    try {
      const it = this.inner!;
      if (ok) r = it.next(value);
      else if (it.throw) r = it.throw(value);
      else throw value;
    } catch (error) {
      return this.exit({ ok: false, error });
    }
    if (!r.done) return r as IteratorResult<unknown, T>;
    return this.exit({ ok: true, value: r.value });
  }

  /** `op` has settled: the scope exit waits for its children, then releases the permit. */
  private exit(outcome: Outcome<unknown>): IteratorResult<unknown, T> {
    this.step = EXITING;
    this.inner = exitFrame(this.task!, this.frame!, outcome) as Iterator<Instruction, unknown, unknown>;
    return this.exitStep(true, undefined);
  }

  private exitStep(ok: boolean, value: unknown): IteratorResult<unknown, T> {
    const it = this.inner!;
    let r: IteratorResult<unknown, unknown>;
    try {
      if (ok) r = it.next(value);
      else if (it.throw) r = it.throw(value);
      else throw value;
    } catch (error) {
      this.step = DONE;
      this.inner = null;
      throw error;
    }
    if (r.done) {
      this.step = DONE;
      this.inner = null;
    }
    return r as IteratorResult<unknown, T>;
  }
}

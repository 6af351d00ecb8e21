/**
 * The worker's state: its deliveries in flight (never more than `concurrency`), its counters, and
 * the shutdown's waits on them.
 * @module
 */
import { action, type Clock, type Operation, type Task } from "@keel/core";
import { ChangeSignal } from "./change-signal.js";
import type { EngineJob, QueueEngine } from "./engine.js";
import { EngineHealth } from "./engine-health.js";
import type { WorkerConfig } from "./options.js";
import { Counters } from "./stats.js";
import type { Job } from "./worker.js";

/** One delivery in flight. */
export interface Delivery<T> {
  readonly job: EngineJob<T>;
  /** The delivery's task (`queue/id attempt k/N`), the slot's child. */
  task: Task<void> | null;
  /** Set when the delivery began (one ended before that never ran: its job is released). */
  started: boolean;
  /** True while its handler runs: only then does a cut cancel the delivery's task. */
  running: boolean;
  /**
   * Why the handler was cut, if it was: a shutdown (released), no progress (stalled), the engine's
   * own cancellation (cancelled, with its reason), or the engine no longer holding the job for
   * this process (lost: BullMQ's lock lapsed).
   */
  cut: "released" | "stalled" | "cancelled" | "lost" | null;
  cancelReason: string | undefined;
  /**
   * Set by whoever ends the job (the delivery, its slot for an abandoned one, the shutdown for one
   * that overran its cut), before its call to the engine: a job is ended by one of them, once.
   */
  settled: boolean;
  /** Set when the delivery's task ran to its end (its `finally`): false for one the runtime abandoned. */
  unwound: boolean;
  /** How a cut handler ended, when it ended at all: returned, or threw (not `Cancelled`). */
  result: { ok: false; error: unknown } | "returned" | null;
  /** What the handler returned (the job's result, for the engine's `complete`). */
  value: unknown;
  startedAt: number;
  /** The delivery's deadline: `min(job deadline, start + timeoutMs)`. */
  until: number;
  lastProgressAt: number;
}

export type Handler<T> = (job: Job<T>) => Operation<unknown>;

/** A slot: a task taking one job at a time; `idle` while it waits in `take`. */
export interface Slot {
  task: Task<void> | null;
  idle: boolean;
}

export class Pool<T> {
  // Invariant: inFlight.size ≤ concurrency (one delivery per slot); a delivery leaves when its slot
  // is done with it.
  readonly inFlight = new Set<Delivery<T>>();
  readonly counters = new Counters();
  /** `concurrency` of them. */
  readonly slots: Slot[] = [];
  /** Jobs whose delivery ended before it began (its task cancelled first): the shutdown releases them. */
  readonly orphans: EngineJob<T>[] = [];
  /** False once the shutdown began: no slot takes again, and no job ends by fetching the next one. */
  taking = true;
  /**
   * The first error met outside a handler (an engine call, the dead-letter sink, a take): the
   * worker fails with it, through its shutdown, so that the other deliveries drain first.
   */
  failure: { error: unknown } | null = null;
  private onFailure: (() => void) | null = null;
  private readonly changes: ChangeSignal;
  readonly health: EngineHealth<T>;
  /** The engine's waiting count as last read (`stats()` while the engine is down). */
  lastWaiting = Number.NaN;

  constructor(
    readonly engine: QueueEngine<T>,
    readonly handler: Handler<T>,
    readonly config: WorkerConfig<T>,
    readonly clock: Clock,
  ) {
    this.changes = new ChangeSignal(clock);
    this.health = new EngineHealth(this);
  }

  /** A job a slot has taken (no suspension between the take and this: a job taken is accounted for). */
  begin(job: EngineJob<T>): Delivery<T> {
    const d = newDelivery(job);
    this.inFlight.add(d);
    return d;
  }

  /** `d` has ended (its outcome settled), or its task ended before it began; idempotent. */
  end(d: Delivery<T>): void {
    if (!this.inFlight.delete(d)) return;
    if (!d.started) this.orphans.push(d.job);
    this.changes.notify();
  }

  fail(error: unknown): void {
    this.failure ??= { error };
    this.onFailure?.();
  }

  /** Throws the first `fail`ure once there is one (a task of the worker's own region waits here). */
  *failed(): Generator<unknown, never, unknown> {
    if (!this.failure)
      yield* action<void>((resolve) => {
        this.onFailure = resolve;
        return () => {
          this.onFailure = null;
        };
      }, `${this.engine.name}: failing on an error outside a handler`);
    throw this.failure!.error;
  }

  /** Claims the ending of `d`'s job: true for the first caller only. */
  claim(d: Delivery<T>): boolean {
    if (d.settled) return false;
    d.settled = true;
    return true;
  }

  /** Stops taking: a slot waiting in `take` is cancelled now (it takes nothing); a busy one ends after its delivery. */
  stopTaking(): void {
    this.taking = false;
    for (const s of this.slots) if (s.idle) s.task?.cancel();
  }

  /** Waits until a delivery ends or `at` passes (whichever first). */
  change(description: string, at = Infinity): Operation<void> {
    return this.changes.wait(description, at);
  }

  /** Waits until nothing is in flight, or until `at`. */
  *settledBy(at: number, description: string): Generator<unknown, void, unknown> {
    while (this.inFlight.size > 0 && this.clock.now() < at) yield* this.change(description, at);
  }
}

/** A delivery of `job` not begun yet: no task, no cut, nothing settled. */
export function newDelivery<T>(job: EngineJob<T>): Delivery<T> {
  return {
    job,
    task: null,
    started: false,
    running: false,
    cut: null,
    cancelReason: undefined,
    settled: false,
    unwound: false,
    result: null,
    value: undefined,
    startedAt: 0,
    until: 0,
    lastProgressAt: 0,
  };
}

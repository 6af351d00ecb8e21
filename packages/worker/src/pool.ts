/**
 * The worker's state: its deliveries in flight (never more than `concurrency`), its counters, and
 * the waits of the take loop and the shutdown on them.
 * @module
 */
import type { Clock, Operation, Scope, Task } from "@keel/core";
import { ChangeSignal } from "./change-signal.js";
import type { EngineJob, QueueEngine } from "./engine.js";
import type { WorkerConfig } from "./options.js";
import { Counters } from "./stats.js";
import type { Job } from "./worker.js";

/** One delivery in flight. */
export interface Delivery<T> {
  readonly job: EngineJob<T>;
  /** The job's task (`queue/id`), which waits on the shielded delivery. */
  task: Task<void> | null;
  /** The handler's task (`queue/id attempt k/N`), once started. */
  inner: Task<unknown> | null;
  /** Set when the delivery began (a job task cancelled before that never ran: it is released). */
  started: boolean;
  /** Why the worker cut the handler, if it did: a shutdown (released) or no progress (stalled). */
  cut: "released" | "stalled" | null;
  lastProgressAt: number;
}

export type Handler<T> = (job: Job<T>) => Operation<unknown>;

export class Pool<T> {
  // Invariant: inFlight.size ≤ concurrency; a delivery leaves only when its job task has settled.
  readonly inFlight = new Map<string, Delivery<T>>();
  readonly counters = new Counters();
  /** Jobs whose task was cancelled before its delivery began: the shutdown releases them. */
  readonly orphans: EngineJob<T>[] = [];
  private readonly changes: ChangeSignal;

  constructor(
    readonly engine: QueueEngine<T>,
    readonly handler: Handler<T>,
    readonly config: WorkerConfig<T>,
    readonly clock: Clock,
    readonly scope: Scope,
    readonly spawnJob: (pool: Pool<T>, d: Delivery<T>) => Task<void>,
  ) {
    this.changes = new ChangeSignal(clock);
  }

  /** Starts a delivery at once (no suspension: a job taken is always accounted for). */
  start(job: EngineJob<T>): void {
    const d: Delivery<T> = { job, task: null, inner: null, started: false, cut: null, lastProgressAt: 0 };
    this.inFlight.set(job.id, d);
    const task = this.spawnJob(this, d);
    d.task = task;
    const settled = () => {
      if (!d.started) this.orphans.push(job);
      this.inFlight.delete(job.id);
      this.changes.notify();
    };
    task.then(settled, settled);
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

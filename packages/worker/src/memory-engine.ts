/**
 * The embedded engine's records: waiting jobs by priority then order, delayed jobs by due time (one
 * timer for the queue), active jobs, dead letters; takers woken one at a time.
 * @module
 */
import type { Clock, Operation } from "@keel/core";
import { ChangeSignal, WakeQueue } from "./change-signal.js";
import { invalidType } from "./checks.js";
import type {
  AddResult,
  DeadLetter,
  DeadLetterReason,
  EngineAddOptions,
  EngineCounts,
  EngineJob,
  JobAttempt,
  QueueEngine,
} from "./engine.js";
import { QueueClosedError } from "./errors.js";
import { MinHeap } from "./min-heap.js";
import { Bound, Sync } from "./op.js";

interface Rec<T> {
  readonly id: string;
  /** Added with an explicit id: once ended, the id stays taken (`ended`). */
  readonly keyed: boolean;
  readonly data: T;
  attempt: number;
  readonly attempts: number | undefined;
  readonly deadlineAt: number;
  readonly priority: number;
  readonly addedAt: number;
  readonly history: JobAttempt[];
  state: "waiting" | "delayed" | "active";
  readyAt: number;
  /** Order of becoming due, for FIFO within a priority. */
  seq: number;
  progress: unknown;
  /** The trace context it was added with (see `EngineAddOptions.trace`). */
  readonly trace: Readonly<Record<string, string>> | undefined;
}

const byDue = <T>(a: Rec<T>, b: Rec<T>) => a.readyAt - b.readyAt || a.seq - b.seq;
const byPriority = <T>(a: Rec<T>, b: Rec<T>) => a.priority - b.priority || a.seq - b.seq;

export class MemoryEngine<T> implements QueueEngine<T> {
  // Invariant: `jobs` holds exactly the waiting, delayed and active records; with `ended`, the ids
  // an add finds taken (the idempotency rule).
  private readonly jobs = new Map<string, Rec<T>>();
  /**
   * The ids of ended jobs that were added with an explicit id, and how each ended: the queue keeps
   * them for its lifetime (as it keeps its dead letters), so an id is never reused.
   */
  private readonly ended = new Map<string, "completed" | "dead-lettered">();
  private readonly ready = new MinHeap<Rec<T>>(byPriority);
  private readonly delayed = new MinHeap<Rec<T>>(byDue);
  private readonly dead: DeadLetter<T>[] = [];
  private readonly changes: ChangeSignal;
  private readonly takers = new WakeQueue();
  /** The timer that makes the first delayed job due (one for the queue, not one per taker). */
  private delayTimer: { at: number; cancel: () => void } | null = null;
  private seq = 0;
  private autoId = 0;
  private active = 0;
  private completed = 0;
  private deadLettered = 0;
  private closed = false;

  constructor(
    readonly name: string,
    private readonly capacity: number,
    private readonly deadLetterLimit: number,
    private readonly clock: Clock,
  ) {
    this.changes = new ChangeSignal(clock);
  }

  add(data: T, options: EngineAddOptions): Operation<AddResult> {
    return new Bound(addJob<T>, this, data, options);
  }

  /** Waits for room (at capacity), then adds. */
  *addWhenRoom(data: T, options: EngineAddOptions): Generator<unknown, AddResult, unknown> {
    while (!this.closed && this.jobs.size >= this.capacity && !this.holds(options.id))
      yield* this.changes.wait(`queue ${this.name}: full (${this.capacity})`);
    if (this.closed) throw new QueueClosedError(this.name, "add");
    return this.insert(data, options);
  }

  /** Whether `id` is a job held or ended (an add of it adds nothing, so needs no room). */
  private holds(id: string | undefined): boolean {
    return id !== undefined && (this.jobs.has(id) || this.ended.has(id));
  }

  private insert(data: T, options: EngineAddOptions): AddResult {
    let id = options.id;
    if (id === undefined) {
      do id = String(++this.autoId);
      while (this.holds(id));
    } else {
      const state = this.jobs.get(id)?.state ?? this.ended.get(id);
      if (state !== undefined) return { id, added: false, state };
    }
    const at = this.clock.now();
    const rec: Rec<T> = {
      id,
      data,
      keyed: options.id !== undefined,
      attempt: 1,
      attempts: options.attempts,
      deadlineAt: options.deadlineAt,
      priority: options.priority,
      addedAt: at,
      history: [],
      state: "waiting",
      readyAt: at + options.delayMs,
      seq: 0,
      progress: undefined,
      trace: options.trace,
    };
    this.jobs.set(id, rec);
    this.enqueue(rec);
    return { id, added: true, state: rec.state };
  }

  private enqueue(rec: Rec<T>): void {
    rec.seq = ++this.seq;
    if (rec.readyAt > this.clock.now()) {
      rec.state = "delayed";
      this.delayed.push(rec);
      this.armDelay();
    } else {
      rec.state = "waiting";
      this.ready.push(rec);
      this.takers.wakeOne();
    }
    this.changes.notify();
  }

  private armDelay(): void {
    const first = this.delayed.peek();
    if (!first || this.closed || (this.delayTimer && this.delayTimer.at <= first.readyAt)) return;
    this.delayTimer?.cancel();
    const at = first.readyAt;
    this.delayTimer = {
      at,
      cancel: this.clock.schedule(at, () => {
        this.delayTimer = null;
        this.promoteDue();
        this.armDelay();
      }),
    };
  }

  /** Moves the delayed jobs now due to the ready ones, waking a taker for each. */
  private promoteDue(): void {
    const at = this.clock.now();
    let moved = false;
    for (let d = this.delayed.peek(); d && d.readyAt <= at; d = this.delayed.peek()) {
      this.delayed.pop();
      d.state = "waiting";
      d.seq = ++this.seq;
      this.ready.push(d);
      this.takers.wakeOne();
      moved = true;
    }
    if (moved) this.changes.notify();
  }

  take(): Operation<EngineJob<T>> {
    return new Bound(takeJob<T>, this, undefined, undefined);
  }

  *takeWhenDue(): Generator<unknown, EngineJob<T>, unknown> {
    for (;;) {
      if (this.closed) throw new QueueClosedError(this.name, "take");
      this.promoteDue();
      const rec = this.ready.pop();
      // Nothing suspends between taking the record and returning it: a cancelled take takes nothing.
      if (rec) return this.deliver(rec);
      try {
        yield* this.takers.wait(`queue ${this.name}: waiting for a job`);
      } catch (e) {
        // Woken for a job and cancelled before taking it: another taker gets the wake.
        if (this.ready.size > 0) this.takers.wakeOne();
        throw e;
      }
    }
  }

  private deliver(rec: Rec<T>): EngineJob<T> {
    rec.state = "active";
    this.active++;
    this.changes.notify();
    const { id, data, attempt, attempts, deadlineAt, priority, addedAt, trace } = rec;
    const history = rec.history.length === 0 ? NO_HISTORY : rec.history.slice();
    const job = { id, data, attempt, attempts, deadlineAt, priority, addedAt, history };
    return trace ? { ...job, trace } : job;
  }

  idle(): Operation<void> {
    return this.changes.wait(`queue ${this.name}: watching`);
  }

  private activeRec(job: EngineJob<T>, op: string): Rec<T> {
    const rec = this.jobs.get(job.id);
    if (rec?.state !== "active" || rec.attempt !== job.attempt)
      throw invalidType(
        `queue(${this.name}).engine.${op}(job)`,
        "a job this engine delivered and still active",
        job.id,
      );
    return rec;
  }

  private finish(rec: Rec<T>, state: "completed" | "dead-lettered"): void {
    this.jobs.delete(rec.id);
    if (rec.keyed) this.ended.set(rec.id, state);
    this.active--;
    this.changes.notify();
  }

  complete(job: EngineJob<T>, _value?: unknown): Operation<void> {
    return this.sync(() => {
      this.finish(this.activeRec(job, "complete"), "completed");
      this.completed++;
    });
  }

  retry(job: EngineJob<T>, f: { delayMs: number; error: unknown; startedAt: number; endedAt: number }) {
    return this.sync(() => {
      const rec = this.activeRec(job, "retry");
      rec.history.push({
        attempt: rec.attempt,
        startedAt: f.startedAt,
        endedAt: f.endedAt,
        error: f.error,
        delayMs: f.delayMs,
      });
      rec.attempt++;
      rec.readyAt = this.clock.now() + f.delayMs;
      this.active--;
      this.enqueue(rec);
    });
  }

  deadLetter(
    job: EngineJob<T>,
    letter: { reason: DeadLetterReason; error: unknown; history: readonly JobAttempt[] },
  ) {
    return this.sync(() => {
      const rec = this.activeRec(job, "deadLetter");
      this.finish(rec, "dead-lettered");
      const { reason, error, history } = letter;
      this.deadLettered++;
      this.dead.push({ id: rec.id, data: rec.data, reason, error, history, at: this.clock.now() });
      // Only the newest are kept (each holds its error objects): a long-running queue stays flat.
      if (this.dead.length > this.deadLetterLimit) this.dead.shift();
    });
  }

  release(job: EngineJob<T>): Operation<void> {
    return this.sync(() => {
      const rec = this.activeRec(job, "release");
      rec.readyAt = this.clock.now();
      this.active--;
      this.enqueue(rec);
    });
  }

  progress(job: EngineJob<T>, value: unknown): Operation<void> {
    return this.sync(() => {
      this.activeRec(job, "progress").progress = value;
    });
  }

  counts(): Operation<EngineCounts> {
    return this.sync(() => ({
      waiting: this.ready.size,
      delayed: this.delayed.size,
      active: this.active,
      completed: this.completed,
      deadLettered: this.deadLettered,
    }));
  }

  deadLetters(): Operation<readonly DeadLetter<T>[]> {
    return this.sync(() => this.dead.slice());
  }

  /** Nothing is held per worker here: the records live until the queue's scope ends (`closeNow`). */
  close(): Operation<void> {
    return this.sync(() => undefined);
  }

  closeNow(): void {
    this.closed = true;
    this.delayTimer?.cancel();
    this.delayTimer = null;
    this.takers.wakeAll();
    this.changes.notify();
  }

  /** An operation that does its work at once: the memory engine never waits but to take or add. */
  private sync<R>(fn: () => R): Operation<R> {
    return new Sync(call<R>, fn, undefined);
  }
}

const call = <R>(fn: () => R): R => fn();
const NO_HISTORY: readonly JobAttempt[] = Object.freeze([]);
const addJob = <T>(engine: MemoryEngine<T>, data: T, options: EngineAddOptions) =>
  engine.addWhenRoom(data, options);
const takeJob = <T>(engine: MemoryEngine<T>) => engine.takeWhenDue();

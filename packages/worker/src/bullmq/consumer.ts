/**
 * `Consumer`: one BullMQ `Worker` used as a job source. Jobs are fetched by hand for the takes that
 * wait (`pump`), or handed over by the Redis call that ended the previous job (`fetchNext`, as
 * BullMQ's own loop does it: one round trip per job instead of two); a job fetched before a `take`
 * asks for it waits in `fetched` (still locked), and is put back when the consumer closes.
 * @module
 */
import { action, type Operation } from "@keel/core";
import type { Job as BullJob, Worker as BullWorker } from "bullmq";
import { lastErrorOf, whenReady } from "./connect.js";

/** A job this process holds active in Redis, with the token that locks it. */
export interface Held<T> {
  readonly job: BullJob<T>;
  readonly token: string;
  readonly consumer: Consumer<T>;
  /** The worker's cut for `cancelJob` (or a lost lock), while a delivery of the job runs. */
  onCancel: ((reason: string, kind?: "cancelled" | "lost") => void) | null;
  /** A `cancelJob` that came before the delivery started. */
  cancelled: string | null;
  /**
   * The job as the take handed it to the worker (null before): the delivery that holds this lock
   * is the one with this very object. A job whose lock lapsed can come back to this process while
   * its first delivery still runs; that delivery then holds nothing, though its job's id is held.
   */
  view: object | null;
}

/**
 * `nextJobFromJobData` and `updateDelays` turn the next job's data returned by a `moveTo…` call into
 * a job, as BullMQ's own loop does (bullmq 6.7, pinned). `drained` (the last fetch found the queue
 * empty: `getNextJob` then blocks on the marker) and `limitUntil` (a rate limit's end, before which
 * `getNextJob` returns nothing without asking Redis) are the worker's own bookkeeping of those
 * replies, read by `pump`. BullMQ's lock manager is not used: the engine extends the locks of its
 * jobs itself, and keeps their cancellation itself (`Held`).
 */
interface Internals<T> {
  drained: boolean;
  readonly limitUntil: number;
  /** When the next delayed job is due (0: none); a blocking fetch waits until then, 10 s at most. */
  readonly blockUntil: number;
  createJob(data: unknown, id: string): BullJob<T>;
  updateDelays(limitDelayMs?: number, delayUntil?: number): void;
  nextJobFromJobData(data?: unknown, id?: string, token?: string): Promise<BullJob<T> | undefined>;
  /**
   * BullMQ 5's fetch without its own failing of a job that stalled out (5's `getNextJob` fails such
   * a job itself, so the worker would never see it, count it or sink it); 6 has none, and its
   * `getNextJob` hands such a job over.
   */
  getTracedNextJob?(token: string, opts: { block: boolean }): Promise<BullJob<T> | undefined>;
}

/** BullMQ's `drainDelay` for the engine's workers (`index.ts`): an empty queue's blocking fetch returns after it. */
const DRAIN_DELAY_MS = 1_000;
/** BullMQ's ceiling on a blocking fetch that waits for a delayed job to be due. */
const MAX_BLOCK_MS = 10_000;

export class Consumer<T> {
  // Invariant: every job in `fetched` is in `held` (locked with its token). A fetch starts only for a
  // waiting take that has none on its way (`fetches.size + fetched.length < waiters.length`), and a
  // take waits only for a free slot, so `fetched` plus the fetches in flight never exceed the slots
  // its worker has free (a job handed over by `fetchNext` is for the slot whose job it ended).
  readonly fetched: Held<T>[] = [];
  closing = false;
  /** The fetches in flight (`getNextJob`), each started for one waiting take. */
  private readonly fetches = new Set<Promise<void>>();
  /**
   * When each fetch in flight is due to have answered (`Date.now()`, BullMQ's clock): at once for a
   * non-blocking one, after its block (BullMQ's `drainDelay`, or up to 10 s before a delayed job is
   * due) for the blocking one. A fetch far past it means Redis does not answer (`stuckFor`).
   */
  private readonly dueAt = new Map<Promise<void>, number>();
  /** Whether one of them blocks on the queue's marker (BZPOPMIN): at most one at a time. */
  private blocking = false;
  /**
   * How many non-blocking fetches may be in flight: one more for each that found a job, back to one
   * when one found none and after a blocking fetch (a slow start, as TCP's: a backlog found by a
   * blocking fetch fills the waiting takes in a few round trips, doubling each, while a trickle of
   * jobs costs one empty fetch each rather than one per idle slot). Unbounded at first: a new worker
   * fills its slots from a backlog in one round trip.
   */
  private window = Infinity;
  /** Set while `pump` waits for a rate limit to end (BullMQ's `getNextJob` returns nothing till then). */
  private limitTimer: ReturnType<typeof setTimeout> | null = null;
  private failure: { error: unknown } | null = null;
  private readonly waiters: (() => void)[] = [];
  private readonly releasing: Promise<unknown>[] = [];
  /** Jobs this consumer held but never handed to a take, put back at its close. */
  private putBack = 0;
  private seq = 0;
  private readonly internals: Internals<T>;
  /** Set once the worker's connections answered (see `connected`). */
  private ready = false;
  private readonly lastError: () => unknown;

  constructor(
    readonly worker: BullWorker<T>,
    private readonly held: Map<string, Held<T>>,
    private readonly name: string,
    private readonly redis: string,
    private readonly connectTimeoutMs: number,
  ) {
    this.internals = worker as unknown as Internals<T>;
    this.lastError = lastErrorOf(worker);
  }

  /** Whether the first take must wait for the connections (see `connected`). */
  get connecting(): boolean {
    return !this.ready;
  }

  /** Waits for the worker's own connections, at most `connectTimeoutMs` (`RedisUnavailableError`). */
  *connected(): Generator<unknown, void, unknown> {
    yield* whenReady(
      this.worker,
      `bullmq ${this.name}: a worker`,
      this.redis,
      this.connectTimeoutMs,
      this.lastError,
    );
    this.ready = true;
  }

  /** A fresh lock token (BullMQ's own form: the worker's id and a counter). */
  token(): string {
    return `${this.worker.id}:${++this.seq}`;
  }

  /** The next fetched job, or `null`: the caller waits for one (see the engine's `take`). */
  next(): Held<T> | null {
    if (this.failure) {
      const { error } = this.failure;
      this.failure = null;
      throw error;
    }
    const h = this.fetched.shift();
    if (!h) return null;
    // `pump` counted this job for the waiting takes while a woken take had yet to collect it: now
    // that it has, they may lack a fetch (without this, the last of a fill waits for a completion).
    if (this.waiters.length > 0) this.pump();
    return h;
  }

  /**
   * Waits until a job arrives for this take (or a fetch fails, or the consumer closes): the take
   * counts among the waiting ones, for which `pump` fetches.
   */
  arrival(boundMs?: number): Operation<void> {
    return action<void>((resolve) => {
      this.waiters.push(resolve);
      this.pump();
      // With a bound, the wait wakes that often to look for a stuck fetch (see the engine's take).
      const timer = boundMs === undefined ? null : setTimeout(() => this.wake(resolve), boundMs);
      return () => {
        if (timer) clearTimeout(timer);
        const i = this.waiters.indexOf(resolve);
        if (i >= 0) this.waiters.splice(i, 1);
      };
    }, `bullmq ${this.name}: waiting for a job`);
  }

  /** Wakes one waiting take (a timer's: it finds no job, looks for a stuck fetch, and waits again). */
  private wake(resolve: () => void): void {
    const i = this.waiters.indexOf(resolve);
    if (i < 0) return;
    this.waiters.splice(i, 1);
    resolve();
  }

  /**
   * Starts the fetches the waiting takes lack: non-blocking ones (`moveToActive`, which share the
   * round trips of the worker's connection), as many as `window` allows; once the queue looked empty
   * (`drained`), one blocking fetch, woken by the marker of a job added or due (the other takes wait
   * for what it brings: a second blocking fetch would not block, and would spin).
   */
  private pump(): void {
    if (this.fetches.size + this.fetched.length >= this.waiters.length) return;
    if (this.closing || this.failure || this.limitTimer) return;
    const limitedMs = this.internals.limitUntil - Date.now();
    if (limitedMs > 0) {
      this.limitTimer = setTimeout(() => {
        this.limitTimer = null;
        this.pump();
      }, limitedMs);
      return;
    }
    while (this.fetches.size + this.fetched.length < this.waiters.length) {
      if (this.internals.drained) {
        if (!this.blocking) this.start(true);
        return;
      }
      if (this.fetches.size - (this.blocking ? 1 : 0) >= this.window) return;
      this.start(false);
    }
  }

  /** Starts one fetch with a token of its own; its job goes to a waiting take, or waits in `fetched`. */
  private start(block: boolean): void {
    const token = this.token();
    if (block) this.blocking = true;
    const now = Date.now();
    const blockMs = !block
      ? 0
      : this.internals.blockUntil > now
        ? Math.min(this.internals.blockUntil - now, MAX_BLOCK_MS)
        : DRAIN_DELAY_MS;
    const fetch: Promise<void> = this.fetchJob(token, block).then(
      (job) => {
        this.fetches.delete(fetch);
        this.dueAt.delete(fetch);
        if (block) this.blocking = false;
        this.window = !block && job ? this.window + 1 : 1;
        if (job) this.received(job, token);
        this.pump();
      },
      (error: unknown) => {
        this.fetches.delete(fetch);
        this.dueAt.delete(fetch);
        if (block) this.blocking = false;
        if (!this.closing) this.failure = { error };
        this.wakeAll();
      },
    );
    this.fetches.add(fetch);
    this.dueAt.set(fetch, now + blockMs);
  }

  /** One fetch: BullMQ 5's without its failing of stalled-out jobs, or 6's `getNextJob`. */
  private fetchJob(token: string, block: boolean): Promise<BullJob<T> | undefined> {
    const { internals } = this;
    return typeof internals.getTracedNextJob === "function"
      ? internals.getTracedNextJob(token, { block })
      : this.worker.getNextJob(token, { block });
  }

  /**
   * Whether a fetch in flight is more than `boundMs` past the time it was due to answer: Redis is
   * gone, paused or unreachable (BullMQ's commands wait in its offline queue for a reconnection).
   * The fetch itself goes on: if it lands, its job waits in `fetched` as any other.
   */
  stuckFor(boundMs: number): boolean {
    const now = Date.now();
    for (const due of this.dueAt.values()) if (now - due > boundMs) return true;
    return false;
  }

  /**
   * The next job's data that a `moveTo…(…, fetchNext)` call returned, locked with `token`: at once
   * for a plain job (no promise to wait for, on the path of every job); through BullMQ's own async
   * path for a repeatable one (added through BullMQ itself), which schedules its next run.
   */
  handOver(next: unknown, token: string): Promise<void> | undefined {
    if (!Array.isArray(next)) return undefined;
    const [data, id, limitDelayMs, delayUntil] = next as [unknown, string, number, number];
    this.internals.updateDelays(limitDelayMs, delayUntil);
    // A job that ends with the next one found a job without blocking (`nextJobFromJobData` marks
    // the queue so for the jobs it makes, and `drained` when none came).
    this.window = data ? this.window + 1 : 1;
    // A repeatable job's key: `repeatJobKey` in BullMQ 6's decoded job, `rjk` in 5's raw hash.
    const repeatable =
      data &&
      ((data as { repeatJobKey?: unknown; rjk?: unknown }).repeatJobKey ?? (data as { rjk?: unknown }).rjk);
    if (data && !repeatable) {
      this.internals.drained = false;
      const job = this.internals.createJob(data, id);
      job.token = token;
      this.received(job, token);
      this.pump();
      return undefined;
    }
    return this.internals.nextJobFromJobData(data, id, token).then((job) => {
      if (job) this.received(job, token);
      this.pump();
    });
  }

  private received(job: BullJob<T>, token: string): void {
    this.arrive(job, token);
    this.wakeOne();
  }

  /** Ends the tracking of a job that has left this process (not of a later hold on the same id). */
  untrack(h: Held<T>): void {
    const id = h.job.id ?? "";
    if (this.held.get(id) === h) this.held.delete(id);
  }

  /**
   * Closes: puts back every job fetched and not taken, waits for the fetches in flight (the blocking
   * one at most BullMQ's `drainDelay`, 1 s here, the others one round trip; `force` does not) and
   * puts their jobs back too, then closes the BullMQ worker. Resolves to the number of jobs it put
   * back.
   */
  async close(force: boolean): Promise<number> {
    this.closing = true;
    if (this.limitTimer) clearTimeout(this.limitTimer);
    this.limitTimer = null;
    this.wakeAll();
    // Never connected: nothing to put back; BullMQ's close of a connection still being made
    // disconnects it (no wait for Redis).
    if (!this.ready) {
      await this.worker.close(true);
      return 0;
    }
    for (const h of this.fetched.splice(0)) this.release(h);
    if (!force) await Promise.all(this.fetches);
    await Promise.all(this.releasing);
    await this.worker.close(force);
    return this.putBack;
  }

  private arrive(job: BullJob<T>, token: string): void {
    const h: Held<T> = { job, token, consumer: this, onCancel: null, cancelled: null, view: null };
    this.held.set(job.id ?? "", h);
    if (this.closing) this.release(h);
    else this.fetched.push(h);
  }

  private release(h: Held<T>): void {
    this.putBack++;
    this.untrack(h);
    this.releasing.push(h.job.moveToWait(h.token).catch(() => {}));
  }

  /**
   * A take cancelled while it waited: its wake, if it had one, goes to another take (a spare wake
   * finds nothing and waits again). A fetch started for it goes on: its job waits in `fetched`.
   */
  passOn(): void {
    if (this.fetched.length > 0) this.wakeOne();
  }

  private wakeOne(): void {
    this.waiters.shift()?.();
  }

  private wakeAll(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }
}

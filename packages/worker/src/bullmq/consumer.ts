/**
 * `Consumer`: one BullMQ `Worker` used as a job source. Jobs are fetched by hand, one blocking fetch
 * at a time, or handed over by the Redis call that ended the previous job (`fetchNext`, as BullMQ's
 * own loop does it: one round trip per job instead of two); a job fetched before a `take` asks for
 * it waits in `fetched` (still locked), and is put back when the consumer closes.
 * @module
 */
import { action, type Operation } from "@keel/core";
import type { Job as BullJob, Worker as BullWorker } from "bullmq";
import { lastErrorOf, whenReady } from "./connect.js";
import type { StoredJob } from "./stored.js";

/** A job this process holds active in Redis, with the token that locks it. */
export interface Held<T> {
  readonly job: BullJob<StoredJob<T>>;
  readonly token: string;
  readonly consumer: Consumer<T>;
  /** The worker's cut for `cancelJob` (or a lost lock), while a delivery of the job runs. */
  onCancel: ((reason: string, kind?: "cancelled" | "lost") => void) | null;
  /** A `cancelJob` that came before the delivery started. */
  cancelled: string | null;
}

/**
 * `nextJobFromJobData` and `updateDelays` turn the next job's data returned by a `moveTo…` call into
 * a job, as BullMQ's own loop does (bullmq 6.7, pinned). BullMQ's lock manager is not used: the
 * engine extends the locks of its jobs itself, and keeps their cancellation itself (`Held`).
 */
interface Internals<T> {
  createJob(data: unknown, id: string): BullJob<StoredJob<T>>;
  updateDelays(limitDelayMs?: number, delayUntil?: number): void;
  nextJobFromJobData(data?: unknown, id?: string, token?: string): Promise<BullJob<StoredJob<T>> | undefined>;
}

export class Consumer<T> {
  // Invariant: every job in `fetched` is in `held` (locked with its token); `fetched` plus the fetch
  // in flight never exceeds the slots its worker has free (see `take` in the engine).
  readonly fetched: Held<T>[] = [];
  closing = false;
  private fetching: Promise<void> | null = null;
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
    readonly worker: BullWorker<StoredJob<T>>,
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

  /** The next fetched job, or `null`: the caller fetches and waits again (see the engine's `take`). */
  next(): Held<T> | null {
    if (this.failure) {
      const { error } = this.failure;
      this.failure = null;
      throw error;
    }
    return this.fetched.shift() ?? null;
  }

  /** Starts one blocking fetch unless one is in flight. */
  fetch(): void {
    if (this.fetching || this.closing) return;
    const token = this.token();
    this.fetching = this.worker.getNextJob(token, { block: true }).then(
      (job) => {
        this.fetching = null;
        if (job) this.arrive(job, token);
        // One taker: it takes the job, or fetches again.
        this.wakeOne();
      },
      (error: unknown) => {
        this.fetching = null;
        if (!this.closing) this.failure = { error };
        this.wakeAll();
      },
    );
  }

  /** Waits until a fetch ends or the consumer closes. */
  arrival(): Operation<void> {
    return action<void>((resolve) => {
      this.waiters.push(resolve);
      return () => {
        const i = this.waiters.indexOf(resolve);
        if (i >= 0) this.waiters.splice(i, 1);
      };
    }, `bullmq ${this.name}: waiting for a job`);
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
    if (data && !(data as { repeatJobKey?: unknown }).repeatJobKey) {
      const job = this.internals.createJob(data, id);
      job.token = token;
      this.received(job, token);
      return undefined;
    }
    return this.internals.nextJobFromJobData(data, id, token).then((job) => {
      if (job) this.received(job, token);
    });
  }

  private received(job: BullJob<StoredJob<T>>, token: string): void {
    this.arrive(job, token);
    this.wakeOne();
  }

  /** Ends the tracking of a job that has left this process. */
  untrack(id: string): void {
    this.held.delete(id);
  }

  /**
   * Closes: puts back every job fetched and not taken, waits for the fetch in flight (at most
   * BullMQ's `drainDelay`, 1 s here; `force` does not) and puts its job back too, then closes the
   * BullMQ worker. Resolves to the number of jobs it put back.
   */
  async close(force: boolean): Promise<number> {
    this.closing = true;
    this.wakeAll();
    // Never connected: nothing to put back; BullMQ's close of a connection still being made
    // disconnects it (no wait for Redis).
    if (!this.ready) {
      await this.worker.close(true);
      return 0;
    }
    for (const h of this.fetched.splice(0)) this.release(h);
    if (!force) await this.fetching;
    await Promise.all(this.releasing);
    await this.worker.close(force);
    return this.putBack;
  }

  private arrive(job: BullJob<StoredJob<T>>, token: string): void {
    const h: Held<T> = { job, token, consumer: this, onCancel: null, cancelled: null };
    this.held.set(job.id ?? "", h);
    if (this.closing) this.release(h);
    else this.fetched.push(h);
  }

  private release(h: Held<T>): void {
    this.putBack++;
    this.untrack(h.job.id ?? "");
    this.releasing.push(h.job.moveToWait(h.token).catch(() => {}));
  }

  /** A take cancelled while it waited: its wake, if it had one, goes to another taker. */
  passOn(): void {
    if (this.fetched.length > 0 || !this.fetching) this.wakeOne();
  }

  private wakeOne(): void {
    this.waiters.shift()?.();
  }

  private wakeAll(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }
}

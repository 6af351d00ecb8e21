/**
 * The BullMQ engine: `QueueEngine` over a BullMQ 5 or 6 queue on Redis, with jobs fetched by hand
 * (`Worker.getNextJob`), so that Keel's worker decides when a slot is free and how each job ends.
 *
 * Its jobs are plain BullMQ jobs, both ways (see stored.ts for what lives where and why): a job a
 * plain BullMQ producer adds is delivered with its `data`, `attempts`, `delay` and `priority`, and a
 * job added here reads as any other to BullMQ's tools and workers: `data` is the payload,
 * `attemptsMade` counts its failed attempts (a retry is BullMQ's `moveToDelayed` that counts one), a
 * completed job has its handler's `returnvalue`, a dead letter is `failed` with its `failedReason`
 * and `stacktrace`. Keel's own fields are one object in the job's options, `opts.keel`.
 * @module
 */
import { randomUUID } from "node:crypto";
import { action, type Operation, until } from "@keel/core";
import type { Queue as BullQueue, Worker as BullWorker } from "bullmq";
import type {
  AddResult,
  DeadLetter,
  DeadLetterReason,
  EngineAddOptions,
  EngineCounts,
  EngineJob,
  JobAttempt,
  JobState,
  QueueEngine,
} from "../engine.js";
import { EngineTimeoutError, JobLockLostError } from "../engine-errors.js";
import { JobStalledOutError } from "../errors.js";
import { Bound } from "../op.js";
import { Consumer, type Held } from "./consumer.js";
import { completeHeld, deadLetterHeld, retryHeld } from "./ends.js";
import { lockLost, stateOf } from "./replies.js";
import { letterOf } from "./stalled.js";
import { type KeelOpts, keelOf } from "./stored.js";
import { takeJob } from "./take.js";
import { readTrace, type TelemetryOptions, writeTrace } from "./trace.js";

export class BullEngine<T> implements QueueEngine<T> {
  // Invariant: every job this process holds active is here with the token that locks it (and its
  // delivery's cut, for `cancelJob`).
  readonly active = new Map<string, Held<T>>();

  constructor(
    readonly name: string,
    private readonly queue: BullQueue<T, unknown, string, T, unknown, string>,
    private readonly makeWorker: () => BullWorker<T>,
    /**
     * Where Redis is (for messages), how long a worker's first take waits for it, and the bound on
     * the calls made for the queue's caller (`callTimeoutMs`: add, counts, dead letters).
     */
    private readonly redis: { describe: string; connectTimeoutMs: number; callTimeoutMs: number },
  ) {
    this.at = `bullmq ${name}: `;
    this.on = ` on Redis ${redis.describe}`;
  }

  /** What a wait on Redis says in the task tree: `bullmq <queue>: <call> on Redis <host:port>`. */
  private readonly at: string;
  private readonly on: string;

  /** The consumer of the worker now running here; made on its first take, gone at its close. */
  private consumer: Consumer<T> | null = null;

  current(): Consumer<T> {
    if (!this.consumer) {
      const worker = this.makeWorker();
      const { describe, connectTimeoutMs } = this.redis;
      this.consumer = new Consumer<T>(worker, this.active, this.name, describe, connectTimeoutMs);
      // Jobs are fetched by hand, so BullMQ's stalled check (which redelivers the jobs of a dead
      // process) runs only if started explicitly.
      void worker.startStalledCheckTimer().catch(() => {});
    }
    return this.consumer;
  }

  add(data: T, o: EngineAddOptions): Operation<AddResult> {
    return this.onRedisBounded("add", this.addJob(data, o));
  }

  private async addJob(data: T, o: EngineAddOptions): Promise<AddResult> {
    // BullMQ's own options where BullMQ has one (a plain BullMQ worker honours them too); Keel's
    // deadline in `opts.keel`, only when there is one (see stored.ts); the producer's trace
    // context where BullMQ's telemetry keeps it (see trace.ts).
    const keel: KeelOpts = {};
    if (o.deadlineAt !== Infinity) keel.deadlineAt = o.deadlineAt;
    const options = writeTrace<
      {
        jobId?: string;
        delay?: number;
        priority?: number;
        attempts?: number;
        keel?: KeelOpts;
      } & TelemetryOptions
    >({}, o.trace);
    if (o.delayMs > 0) options.delay = o.delayMs;
    if (o.priority > 0) options.priority = o.priority;
    if (o.attempts !== undefined) options.attempts = o.attempts;
    const fresh: JobState = o.delayMs > 0 ? "delayed" : "waiting";
    if (o.id === undefined) {
      if (keel.deadlineAt !== undefined) options.keel = keel;
      const job = await this.queue.add(JOB_NAME, data, options as object);
      return { id: job.id ?? "", added: true, state: fresh };
    }
    // BullMQ adds nothing for an id it holds, ended jobs included (their records are kept), and
    // answers the same either way: the nonce in the options read back tells this add from an
    // earlier one (the timestamp would not: two adds can share a millisecond).
    const nonce = randomUUID();
    keel.nonce = nonce;
    options.keel = keel;
    options.jobId = o.id;
    await this.queue.add(JOB_NAME, data, options as object);
    const kept = await this.queue.getJob(o.id);
    // Removed in between (not by this engine, which removes nothing): add again.
    if (!kept) return this.addJob(data, o);
    if (keelOf(kept).nonce === nonce) return { id: o.id, added: true, state: fresh };
    return { id: o.id, added: false, state: stateOf(await kept.getState()) };
  }

  take(boundMs?: number): Operation<EngineJob<T>> {
    return new Bound(takeJob<T>, this, boundMs, undefined);
  }

  /** The job `h` as the worker sees it. */
  view(h: Held<T>): EngineJob<T> {
    const { job } = h;
    const keel = keelOf(job);
    const attempts = job.opts.attempts;
    const view: EngineJob<T> = {
      id: job.id ?? "",
      data: job.data,
      // BullMQ counts the attempts spent (a release or a stall spends none): this is the next.
      attempt: (job.attemptsMade || 0) + 1,
      // BullMQ's own option (0, its default, is none: the worker's applies).
      attempts: typeof attempts === "number" && attempts > 0 ? attempts : undefined,
      deadlineAt: typeof keel.deadlineAt === "number" ? keel.deadlineAt : Infinity,
      priority: job.opts.priority ?? 0,
      addedAt: job.timestamp,
      history: (Array.isArray(keel.history) ? keel.history : []) as JobAttempt[],
      // Marked by BullMQ's stalled check for stalling more than `maxStalls` times (see stalled.ts).
      stalledOut: job.deferredFailure
        ? new JobStalledOutError(this.name, job.id ?? "", job.stalledCounter || undefined)
        : undefined,
      trace: readTrace(job.opts),
    };
    h.view = view;
    return view;
  }

  /**
   * The hold of the delivery given `job`; one that no longer holds it (forgotten, its lock lost,
   * or delivered again since: its lock lapsed and the job came back here) is not its to end.
   */
  private held(job: EngineJob<T>): Held<T> {
    const h = this.active.get(job.id);
    if (h?.view === job) return h;
    const why = h
      ? "its lock lapsed, and a later delivery of the job holds it"
      : "it is not active in this process";
    throw new JobLockLostError(this.name, job.id, why);
  }

  /** The hold of the delivery given `job`, if it still holds the job. */
  private holdOf(job: EngineJob<T>): Held<T> | undefined {
    const h = this.active.get(job.id);
    return h?.view === job ? h : undefined;
  }

  private finish(job: EngineJob<T>, what: string, step: (h: Held<T>) => Promise<unknown>) {
    const h = this.held(job);
    return this.onRedis(
      `${what} ${job.id}`,
      step(h).then(
        (next) => {
          h.consumer.untrack(h);
          return h.consumer.handOver(next, h.token);
        },
        (error: unknown) => {
          throw lockLost(this.name, job.id, error) ?? error;
        },
      ),
    );
  }

  /**
   * A wait for `promise`, a call to Redis, that names it in the task tree (`snapshot`, the report
   * of a shutdown past its budget): `bullmq <queue>: complete <id> on Redis <host:port>`, where
   * `until` would say `until(promise)`. The description is concatenated, not formatted: V8 keeps it
   * a rope until a snapshot reads it.
   */
  private onRedis<R>(what: string, promise: Promise<R>): Operation<R> {
    return action<R>(
      (resolve, reject) => {
        promise.then(resolve, reject);
        return noTeardown;
      },
      this.at + what + this.on,
    );
  }

  /**
   * `onRedis`, bounded by `callTimeoutMs` (a call made for the queue's caller, who has no bound of
   * its own to give): an `EngineTimeoutError` naming the call when Redis does not answer. The call
   * itself goes on (it may still land: an `add` with an `id` is safe to make again). The bound is
   * a plain timer, not a timeout scope, so the call stays in the caller's scope (its trace context).
   */
  private onRedisBounded<R>(what: string, promise: Promise<R>): Operation<R> {
    const ms = this.redis.callTimeoutMs;
    if (ms === Infinity) return this.onRedis(what, promise);
    return action<R>(
      (resolve, reject) => {
        const timer = setTimeout(
          () => reject(new EngineTimeoutError(this.name, what, ms, "callTimeoutMs")),
          ms,
        );
        promise.then(resolve, reject).finally(() => clearTimeout(timer));
        return () => clearTimeout(timer);
      },
      this.at + what + this.on,
    );
  }

  /** The worker gives up on ending `job`: its lock is no longer extended, and lapses. */
  forget(job: EngineJob<T>): void {
    if (this.holdOf(job)) this.active.delete(job.id);
  }

  /** Whether the call that ends a job may fetch the next one for `h`'s consumer. */
  private fetchNext(h: Held<T>, takingNext: boolean): boolean {
    return takingNext && h.consumer === this.consumer && !h.consumer.closing;
  }

  complete(job: EngineJob<T>, value?: unknown, takingNext = false): Operation<void> {
    return this.finish(job, "complete", (h) => completeHeld(h, value, this.fetchNext(h, takingNext)));
  }

  retry(job: EngineJob<T>, f: { delayMs: number; error: unknown; startedAt: number; endedAt: number }) {
    return this.finish(job, "retry", (h) => retryHeld(h, job, f));
  }

  deadLetter(
    job: EngineJob<T>,
    letter: { reason: DeadLetterReason; error: unknown; history: readonly JobAttempt[] },
    takingNext = false,
  ) {
    return this.finish(job, "deadLetter", (h) => deadLetterHeld(h, letter, this.fetchNext(h, takingNext)));
  }

  release(job: EngineJob<T>): Operation<void> {
    return this.finish(job, "release", (h) => h.job.moveToWait(h.token));
  }

  progress(job: EngineJob<T>, value: unknown): Operation<void> {
    const h = this.held(job);
    return this.onRedis(
      `progress ${job.id}`,
      h.job.updateProgress(value as number).catch((error: unknown) => {
        // A job gone from Redis (restarted empty) is not this process's: not an outage.
        throw lockLost(this.name, job.id, error) ?? error;
      }),
    );
  }

  counts(): Operation<EngineCounts> {
    return this.onRedisBounded(
      "counts",
      this.queue
        .getJobCounts("wait", "prioritized", "delayed", "active", "completed", "failed")
        .then((c) => ({
          waiting: (c.wait ?? 0) + (c.prioritized ?? 0),
          delayed: c.delayed ?? 0,
          active: c.active ?? 0,
          completed: c.completed ?? 0,
          deadLettered: c.failed ?? 0,
        })),
    );
  }

  /** Removes every key of the queue (tests), bounded by `callTimeoutMs`. */
  obliterate(): Operation<void> {
    return this.onRedisBounded("obliterate", this.queue.obliterate({ force: true }));
  }

  deadLetters(): Operation<readonly DeadLetter<T>[]> {
    return this.onRedisBounded(
      "deadLetters",
      this.queue.getFailed(0, -1).then((jobs) =>
        jobs.reverse().map((j) => ({
          id: j.id ?? "",
          data: j.data,
          // A job BullMQ failed for stalling more than maxStalls times reads as `stalled`.
          ...letterOf(this.name, j),
          history: (keelOf(j).history ?? []) as JobAttempt[],
          at: j.finishedOn ?? 0,
        })),
      ),
    );
  }

  /**
   * Extends the lock of every job this process holds (BullMQ would otherwise redeliver it as
   * stalled). A job whose lock is gone (it lapsed: the event loop was blocked past `lockMs`, or
   * Redis lost it) is no longer this process's: its delivery is cut as `lost`, and it is no longer
   * tracked. A call that fails (Redis unreachable) changes nothing: the next round tries again.
   */
  extendLocks(durationMs: number): Promise<unknown> {
    return Promise.all(
      [...this.active.values()].map((h) =>
        h.job.extendLock(h.token, durationMs).then(
          (extended) => {
            if (extended === 0 && this.active.get(h.job.id ?? "") === h) this.lose(h);
          },
          () => {},
        ),
      ),
    );
  }

  private lose(h: Held<T>): void {
    this.active.delete(h.job.id ?? "");
    const reason = `its lock in Redis lapsed (not extended within lockMs); this process no longer holds it`;
    const cancel = h.onCancel;
    h.onCancel = null;
    cancel?.(reason, "lost");
  }

  /** Cancels a job this process holds (its delivery, now or when it starts); false if none. */
  cancelJob(id: string, reason = "cancelJob"): boolean {
    const h = this.active.get(id);
    if (!h) return false;
    const cancel = h.onCancel;
    if (cancel) {
      h.onCancel = null;
      cancel(reason);
    } else h.cancelled ??= reason;
    return true;
  }

  onCancel(job: EngineJob<T>, cancel: ((reason: string, kind?: "cancelled" | "lost") => void) | null): void {
    const h = this.holdOf(job);
    if (!h) return;
    if (cancel && h.cancelled !== null) cancel(h.cancelled);
    else h.onCancel = cancel;
  }

  /**
   * Closes the consumer (its jobs fetched ahead go back, counted in the result); a later worker on
   * this queue gets a new one.
   */
  close(): Operation<number> {
    const consumer = this.consumer;
    this.consumer = null;
    if (!consumer) return until(Promise.resolve(0));
    const closing = consumer.close(false);
    this.closing = consumer;
    const settled = () => {
      if (this.closing === consumer) this.closing = null;
    };
    closing.then(settled, settled);
    return this.onRedis("closing the worker", closing);
  }

  /** A consumer whose close has not settled (the worker raced it against its cap). */
  private closing: Consumer<T> | null = null;

  /** True while a worker's close of its consumer is still unanswered: Redis is gone or paused. */
  closeUnanswered(): boolean {
    return this.closing !== null;
  }

  /** Drops every connection of the consumers at once (the end of a teardown Redis did not answer). */
  disconnect(): Promise<unknown> {
    const consumers = [this.consumer, this.closing].filter((c): c is Consumer<T> => c !== null);
    this.consumer = null;
    return Promise.all(consumers.map((c) => c.worker.disconnect().catch(() => {})));
  }

  /** At the queue's end: the consumer, if a worker left one open, without waiting for its fetch. */
  closeNow(): Promise<void> {
    const consumer = this.consumer;
    this.consumer = null;
    return consumer ? consumer.close(true).then(() => undefined) : Promise.resolve();
  }
}

/** The name of the jobs Keel adds (BullMQ's tools list jobs by name; Keel's worker ignores it). */
const JOB_NAME = "job";

/** An `action`'s teardown when leaving the wait has nothing to undo (a promise cannot be stopped). */
const noTeardown = () => {};

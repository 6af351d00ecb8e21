/**
 * The BullMQ engine: `QueueEngine` over a BullMQ 6 queue on Redis, with jobs fetched by hand
 * (`Worker.getNextJob`), so that Keel's worker decides when a slot is free and how each job ends.
 * @module
 */
import { randomUUID } from "node:crypto";
import { action, type Operation, until } from "@keel/core";
import type { Job as BullJob, Queue as BullQueue, Worker as BullWorker } from "bullmq";
import type {
  AddResult,
  DeadLetter,
  DeadLetterReason,
  EngineAddOptions,
  EngineCounts,
  EngineJob,
  JobAttempt,
  QueueEngine,
} from "../engine.js";
import { QueueClosedError } from "../errors.js";

/** What is stored in Redis for one job: the payload and what the worker needs across processes. */
export interface StoredJob<T> {
  payload: T;
  /** The next delivery's number. */
  attempt: number;
  attempts: number | null;
  /** `null` for no deadline (JSON has no Infinity). */
  deadlineAt: number | null;
  addedAt: number;
  history: StoredAttempt[];
  /** Tells this `add` from an earlier one with the same id. */
  nonce: string;
  deadReason?: DeadLetterReason;
}

type StoredAttempt = Omit<JobAttempt, "error"> & {
  error: { name?: string; message?: string; code?: unknown };
};

function storedError(e: unknown): StoredAttempt["error"] {
  const o = (typeof e === "object" && e !== null ? e : { message: String(e) }) as Record<string, unknown>;
  return { name: o.name as string | undefined, message: o.message as string | undefined, code: o.code };
}

export class BullEngine<T> implements QueueEngine<T> {
  // Invariant: every job this process holds active is here with the token that locks it.
  readonly active = new Map<string, { job: BullJob<StoredJob<T>>; token: string }>();

  constructor(
    readonly name: string,
    private readonly queue: BullQueue<StoredJob<T>>,
    private readonly makeWorker: () => BullWorker<StoredJob<T>>,
    private readonly now: () => number,
  ) {}

  /** The BullMQ consumer of the worker now running here; made on its first take, gone at its close. */
  private consumer: BullWorker<StoredJob<T>> | null = null;

  private worker(): BullWorker<StoredJob<T>> {
    this.consumer ??= this.makeWorker();
    return this.consumer;
  }

  add(data: T, o: EngineAddOptions): Operation<AddResult> {
    const nonce = randomUUID();
    const stored: StoredJob<T> = {
      payload: data,
      attempt: 1,
      attempts: o.attempts ?? null,
      deadlineAt: o.deadlineAt === Infinity ? null : o.deadlineAt,
      addedAt: this.now(),
      history: [],
      nonce,
    };
    return until(
      (async () => {
        const job = await this.queue.add("job", stored, {
          jobId: o.id,
          delay: o.delayMs,
          priority: o.priority || undefined,
          attempts: 1,
          removeOnComplete: false,
          removeOnFail: false,
        });
        const id = job.id ?? "";
        if (o.id === undefined) return { id, added: true };
        const kept = await this.queue.getJob(id);
        return { id, added: kept?.data.nonce === nonce };
      })(),
    );
  }

  take(): Operation<EngineJob<T>> {
    const engine = this;
    return {
      *[Symbol.iterator]() {
        for (;;) {
          const token = randomUUID();
          const consumer = engine.worker();
          const job = yield* engine.next(consumer, token);
          if (consumer.closing) throw new QueueClosedError(engine.name, "take");
          if (job) {
            engine.active.set(job.id ?? "", { job, token });
            return engine.view(job);
          }
        }
      },
    };
  }

  /** One blocking fetch; a job that arrives after the take was cancelled goes back at once. */
  private next(
    consumer: BullWorker<StoredJob<T>>,
    token: string,
  ): Operation<BullJob<StoredJob<T>> | undefined> {
    return action((resolve, reject) => {
      let abandoned = false;
      consumer.getNextJob(token, { block: true }).then(
        (job) => {
          if (!abandoned) resolve(job);
          else if (job) void job.moveToWait(token).catch(() => {});
        },
        (e) => {
          if (!abandoned) reject(e);
        },
      );
      return () => {
        abandoned = true;
      };
    }, `bullmq ${this.name}: waiting for a job`);
  }

  private view(job: BullJob<StoredJob<T>>): EngineJob<T> {
    const d = job.data;
    return {
      id: job.id ?? "",
      data: d.payload,
      attempt: d.attempt,
      attempts: d.attempts ?? undefined,
      deadlineAt: d.deadlineAt ?? Infinity,
      priority: job.opts.priority ?? 0,
      addedAt: d.addedAt,
      history: d.history as JobAttempt[],
    };
  }

  private held(job: EngineJob<T>): { job: BullJob<StoredJob<T>>; token: string } {
    const h = this.active.get(job.id);
    if (!h) throw new TypeError(`bullmq ${this.name}: job ${job.id} is not active in this process`);
    return h;
  }

  private finish(
    job: EngineJob<T>,
    step: (h: { job: BullJob<StoredJob<T>>; token: string }) => Promise<unknown>,
  ) {
    const h = this.held(job);
    return until(
      step(h).then(() => {
        this.active.delete(job.id);
      }),
    );
  }

  complete(job: EngineJob<T>): Operation<void> {
    return this.finish(job, (h) => h.job.moveToCompleted(null, h.token, false));
  }

  retry(job: EngineJob<T>, f: { delayMs: number; error: unknown; startedAt: number; endedAt: number }) {
    return this.finish(job, async (h) => {
      const d = h.job.data;
      const record: StoredAttempt = {
        attempt: d.attempt,
        startedAt: f.startedAt,
        endedAt: f.endedAt,
        error: storedError(f.error),
        delayMs: f.delayMs,
      };
      await h.job.updateData({ ...d, attempt: d.attempt + 1, history: [...d.history, record] });
      await h.job.moveToDelayed(Date.now() + f.delayMs, h.token);
    });
  }

  deadLetter(
    job: EngineJob<T>,
    letter: { reason: DeadLetterReason; error: unknown; history: readonly JobAttempt[] },
  ) {
    return this.finish(job, async (h) => {
      const history = letter.history.map((a) => ({ ...a, error: storedError(a.error) }));
      await h.job.updateData({ ...h.job.data, deadReason: letter.reason, history });
      const e = letter.error instanceof Error ? letter.error : new Error(String(letter.error));
      await h.job.moveToFailed(e, h.token, false);
    });
  }

  release(job: EngineJob<T>): Operation<void> {
    return this.finish(job, (h) => h.job.moveToWait(h.token));
  }

  progress(job: EngineJob<T>, value: unknown): Operation<void> {
    const h = this.held(job);
    return until(h.job.updateProgress(value as number));
  }

  counts(): Operation<EngineCounts> {
    return until(
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

  deadLetters(): Operation<readonly DeadLetter<T>[]> {
    return until(
      this.queue.getFailed(0, -1).then((jobs) =>
        jobs.reverse().map((j) => ({
          id: j.id ?? "",
          data: j.data.payload,
          reason: j.data.deadReason ?? "rejected",
          error: j.failedReason,
          history: j.data.history as JobAttempt[],
          at: j.finishedOn ?? 0,
        })),
      ),
    );
  }

  /** Extends the lock of every job this process holds (BullMQ would otherwise redeliver it as stalled). */
  extendLocks(durationMs: number): Promise<unknown> {
    return Promise.all(
      [...this.active.values()].map((h) => h.job.extendLock(h.token, durationMs).catch(() => 0)),
    );
  }

  /** Closes the consumer; a later worker on this queue gets a new one. */
  close(): Operation<void> {
    const consumer = this.consumer;
    this.consumer = null;
    return until(consumer ? consumer.close() : Promise.resolve());
  }

  /** At the queue's end: the consumer, if a worker left one open, without waiting for its fetch. */
  closeNow(): Promise<void> {
    const consumer = this.consumer;
    this.consumer = null;
    return consumer ? consumer.close(true) : Promise.resolve();
  }
}

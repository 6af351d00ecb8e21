/**
 * BullMQ idioms, translated to Keel's worker (`@keel/worker`). Each block names the BullMQ code it
 * replaces, and checks (`assert`) what the guide page "Coming from BullMQ" says.
 *
 * It runs on the embedded queue and the virtual clock, so it needs no Redis and no waiting: with
 * BullMQ, only the line that creates the queue changes
 * (`yield* useBullQueue<Email>({ name: "emails", connection })` from `@keel/worker/bullmq`).
 */
import assert from "node:assert/strict";
import { constant, type Operation, sleep, suspend } from "@keel/core";
import { createHarness } from "@keel/testing";
import { createMemoryQueue, type ShutdownReport, useWorker } from "@keel/worker";

interface Email {
  to: string;
}

/** What the worker did with each job, as `worker:job` events say it (start events left out). */
function outcomes(h: ReturnType<typeof createHarness>): string[] {
  return h
    .eventsOf("worker:job")
    .filter((e) => e.transition !== "start")
    .map((e) => `${e.jobId} ${e.transition}${e.reason ? ` ${e.reason}` : ""} (attempt ${e.attempt})`);
}

// new Queue("emails"); new Worker("emails", processor, { concurrency: 4 });
// worker.on("completed" | "failed", ...); queue.add("welcome", data, { jobId: "welcome-a" })
//   ->  createMemoryQueue / useBullQueue, useWorker, the worker:job events, queue.add(data, { id })
{
  const h = createHarness(); // in a service: main(service, { onEvent }) receives the same events
  const sent: string[] = [];
  await h.run(function* service(): Operation<void> {
    const queue = yield* createMemoryQueue<Email>({ name: "emails" });
    const worker = yield* useWorker(
      queue,
      function* sendEmail(job) {
        yield* sleep(20); // the SMTP call
        sent.push(job.data.to);
      },
      { concurrency: 4 },
    );
    const first = yield* queue.add({ to: "a@example.com" }, { id: "welcome-a" });
    // A jobId already held or ended adds nothing, as in BullMQ; Keel says where that job stands.
    const again = yield* queue.add({ to: "a@example.com" }, { id: "welcome-a" });
    assert.deepEqual([first.added, again.added, again.state], [true, false, "waiting"]);
    while ((yield* worker.stats()).completed < 1) yield* queue.idle();
  });
  assert.deepEqual(sent, ["a@example.com"]);
  assert.deepEqual(outcomes(h), ["welcome-a complete (attempt 1)"]);
  await h.expectClean();
}

// Retries. BullMQ: { attempts: 3, backoff: { type: "fixed", delay: 50 } } retries every error
// (UnrecoverableError excepted). Keel retries only what `retryOn` accepts, by default `isTransient`:
// network errors, 408/425/429/5xx statuses, timeouts. Anything else is dead-lettered as `rejected`
// at its first failure, with no attempt wasted on a bug.
{
  const h = createHarness();
  const letters = await h.run(function* service() {
    const queue = yield* createMemoryQueue<Email>({ name: "emails" });
    yield* useWorker(
      queue,
      function* sendEmail(job) {
        yield* sleep(10);
        if (job.data.to === "busy@example.com" && job.attempt === 1)
          throw Object.assign(new Error("SMTP 421, try later"), { status: 503 }); // transient
        if (job.data.to === "bad") throw new TypeError("invalid address"); // a bug: not retried
      },
      { retry: { attempts: 3, backoff: constant(50) } },
    );
    yield* queue.add({ to: "busy@example.com" }, { id: "busy" });
    yield* queue.add({ to: "bad" }, { id: "bad" });
    while ((yield* queue.counts()).completed + (yield* queue.counts()).deadLettered < 2) yield* queue.idle();
    return yield* queue.deadLetters();
  });
  assert.deepEqual(outcomes(h), [
    "busy retry error (attempt 1)",
    "bad dead-letter rejected (attempt 1)",
    "busy complete (attempt 2)",
  ]);
  assert.equal((letters[0]!.error as Error).message, "invalid address"); // BullMQ's failedReason
  await h.expectClean();
}

// BullMQ's behaviour, retry everything: retryOn: () => true. Its UnrecoverableError: return false.
{
  const h = createHarness();
  await h.run(function* service() {
    const queue = yield* createMemoryQueue<Email>({ name: "emails" });
    yield* useWorker(
      queue,
      function* sendEmail() {
        yield* sleep(10);
        throw new Error("template missing");
      },
      { retry: { attempts: 3, backoff: constant(50), retryOn: () => true } },
    );
    yield* queue.add({ to: "a@example.com" }, { id: "a" });
    while ((yield* queue.counts()).deadLettered < 1) yield* queue.idle();
  });
  assert.deepEqual(outcomes(h), [
    "a retry error (attempt 1)",
    "a retry error (attempt 2)",
    "a dead-letter exhausted (attempt 3)",
  ]);
  await h.expectClean();
}

// Timeouts and deadlines. BullMQ has no per-job timeout (a processor runs until it returns). Keel
// runs each delivery under min(job deadline, start + timeoutMs): the handler gets Cancelled, its
// finally runs, and a job whose own deadline (ttlMs, deadlineAt) has passed is dead-lettered as
// `expired`, never retried past it.
{
  const h = createHarness();
  await h.run(function* service() {
    const queue = yield* createMemoryQueue<Email>({ name: "emails" });
    yield* useWorker(
      queue,
      function* sendEmail() {
        try {
          yield* sleep(60_000); // a hung SMTP server
        } finally {
          h.mark("finally ran");
        }
      },
      { timeoutMs: 5_000, retry: { attempts: 3, backoff: constant(50) } },
    );
    yield* queue.add({ to: "a@example.com" }, { id: "a", ttlMs: 2_000 }); // the job's own deadline
    while ((yield* queue.counts()).deadLettered < 1) yield* queue.idle();
  });
  assert.deepEqual(h.log, ["finally ran@2000"]);
  assert.deepEqual(outcomes(h), ["a dead-letter expired (attempt 1)"]);
  await h.expectClean();
}

// Stalled jobs. BullMQ's stalled job is one whose worker process died: its lock lapses
// (lockDuration) and the stalled check puts it back, up to maxStalledCount times. useBullQueue does
// the same with lockMs and maxStalls. Keel adds stallMs, for a live handler that stopped making
// progress: job.progress() is the heartbeat; past stallMs without one, the delivery is cut and retried.
{
  const h = createHarness();
  await h.run(function* service() {
    const queue = yield* createMemoryQueue<Email>({ name: "emails" });
    yield* useWorker(
      queue,
      function* sendBatch(job) {
        for (let i = 1; i <= 3; i++) {
          yield* sleep(100);
          yield* job.progress(i); // BullMQ: job.updateProgress(i)
        }
        if (job.attempt === 1) yield* sleep(60_000); // stuck, still alive
      },
      { stallMs: 1_000, retry: { attempts: 3, backoff: constant(50) } },
    );
    yield* queue.add({ to: "list@example.com" }, { id: "batch" });
    while ((yield* queue.counts()).completed < 1) yield* queue.idle();
  });
  assert.deepEqual(outcomes(h), ["batch retry stalled (attempt 1)", "batch complete (attempt 2)"]);
  await h.expectClean();
}

// Shutdown. BullMQ: await worker.close() waits for the active jobs, however long they take
// (close(true) does not wait at all). Keel: the worker's scope ends (main's SIGTERM), it stops
// taking, drains for drainMs, cuts what still runs (finally blocks run under cleanupBudgetMs), puts
// those jobs back with their attempt unspent, and closes the engine within closeCapMs.
{
  const h = createHarness();
  const reports: ShutdownReport[] = [];
  const service = h.run(function* service(): Operation<void> {
    const queue = yield* createMemoryQueue<Email>({ name: "emails" });
    yield* useWorker(
      queue,
      function* sendEmail(job) {
        try {
          yield* sleep(job.data.to === "slow@example.com" ? 60_000 : 300);
        } finally {
          h.mark(`${job.id} finally`);
        }
      },
      { concurrency: 2, drainMs: 1_000, onShutdown: (r) => reports.push(r) },
    );
    yield* queue.add({ to: "quick@example.com" }, { id: "quick" });
    yield* queue.add({ to: "slow@example.com" }, { id: "slow" });
    yield* suspend(); // serve until cancelled
  });
  await h.run(function* operator() {
    yield* sleep(100);
    yield* service.cancel(); // what SIGTERM does to main
  });
  // quick finishes during the drain; slow is cut at 100 + drainMs and released, attempt unspent.
  assert.deepEqual(h.log, ["quick finally@300", "slow finally@1100"]);
  assert.deepEqual(outcomes(h), ["quick complete (attempt 1)", "slow release (attempt 1)"]);
  assert.deepEqual(
    reports.map((r) => [r.inFlightAtStop, r.finishedInDrain, r.released]),
    [[2, 1, 1]],
  );
  await h.expectClean();
}

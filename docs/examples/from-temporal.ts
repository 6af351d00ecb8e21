/**
 * Temporal idioms, translated to Keel. Each block names the Temporal code it replaces, and checks
 * (`assert`) what the guide page "Coming from Temporal" says. Everything runs on the virtual clock,
 * so the assertions name exact milliseconds.
 *
 * Keel has no server and no durable workflow history: what maps is the activity side (timeouts,
 * retries, heartbeats) and cancellation scopes, inside one process.
 */
import assert from "node:assert/strict";
import {
  exponential,
  isCancelled,
  isTaskCancelledError,
  isTimeoutError,
  now,
  type Operation,
  retry,
  shield,
  sleep,
  spawn,
  timeout,
} from "@keel/core";
import { createHarness } from "@keel/testing";
import { createMemoryQueue, useWorker } from "@keel/worker";

class InvalidOrder extends Error {
  override name = "InvalidOrder";
}

/** An activity: charging a card. The first call hangs; `invalid` orders fail for good. */
function chargeCard(order: string, calls: { n: number }): Operation<string> {
  return {
    *[Symbol.iterator]() {
      calls.n++;
      if (order === "invalid") throw new InvalidOrder(`order ${order} has no items`);
      yield* sleep(calls.n === 1 ? 60_000 : 50);
      return `charged ${order}`;
    },
  };
}

// proxyActivities({
//   startToCloseTimeout: "1s",           // each attempt            ->  perAttemptMs
//   scheduleToCloseTimeout: "5s",        // all attempts, backoffs  ->  budgetMs
//   retry: { initialInterval: "100ms", backoffCoefficient: 2, maximumInterval: "1s",
//            maximumAttempts: 5, nonRetryableErrorTypes: ["InvalidOrder"] },
// })
const policy = {
  attempts: 5,
  perAttemptMs: 1_000,
  budgetMs: 5_000,
  backoff: exponential({ baseMs: 100, factor: 2, maxMs: 1_000, jitter: "none" }),
  // Temporal retries every error not listed as non-retryable; so does this. Keel's default
  // (`isTransient`) retries only network errors, retryable HTTP statuses and timeouts.
  retryOn: (e: unknown) => !(e instanceof InvalidOrder),
};

{
  const h = createHarness();
  const calls = { n: 0 };
  const result = await h.run(function* workflow() {
    const value = yield* retry(() => chargeCard("o-1", calls), policy);
    return `${value} at ${yield* now()}`;
  });
  // Attempt 1 is cut at its start-to-close (1000), the backoff waits 100, attempt 2 takes 50.
  assert.equal(result, "charged o-1 at 1150");
  assert.equal(calls.n, 2);
  await h.expectClean();
}

// nonRetryableErrorTypes: ["InvalidOrder"]  ->  retryOn returns false: thrown as is, at once.
{
  const h = createHarness();
  const calls = { n: 0 };
  await assert.rejects(
    Promise.resolve(h.run(() => retry(() => chargeCard("invalid", calls), policy))),
    InvalidOrder,
  );
  assert.equal(calls.n, 1);
  await h.expectClean();
}

// heartbeatTimeout: "1s" and Context.current().heartbeat(details)  ->  a worker's stallMs and
// yield* job.progress(details). A delivery silent for stallMs is cut (its finally runs) and retried.
// scheduleToStartTimeout  ->  the job's own deadline (ttlMs): a job taken after it is not run.
{
  const h = createHarness();
  await h.run(function* activities() {
    const queue = yield* createMemoryQueue<string>({ name: "exports" });
    yield* useWorker(
      queue,
      function* exportReport(job) {
        if (job.data === "late") return;
        for (let page = 1; page <= 3; page++) {
          yield* sleep(200);
          yield* job.progress({ page }); // the heartbeat
        }
        if (job.attempt === 1) yield* sleep(60_000); // stuck, and silent
      },
      { stallMs: 1_000, concurrency: 1 },
    );
    yield* queue.add("report", { id: "report" });
    yield* queue.add("late", { id: "late", ttlMs: 500 }); // waits behind report: never starts
    while ((yield* queue.counts()).completed + (yield* queue.counts()).deadLettered < 2) yield* queue.idle();
  });
  const seen = h
    .eventsOf("worker:job")
    .filter((e) => e.transition !== "start")
    .map((e) => `${e.jobId} ${e.transition}${e.reason ? ` ${e.reason}` : ""}`);
  // The one slot frees when report's first delivery is cut (1600): late is taken then, expired.
  assert.deepEqual(seen, ["report retry stalled", "late dead-letter expired", "report complete"]);
  await h.expectClean();
}

// CancellationScope.withTimeout(ms, fn)  ->  timeout(ms, op)
// CancellationScope.nonCancellable(fn)   ->  shield(op, { limitMs }): finishes even when cancelled
// CancellationScope.cancellable(fn), scope.cancel()  ->  spawn(op), task.cancel()
// isCancellation(err)                    ->  isCancelled(err) inside; TaskCancelledError outside
{
  const h = createHarness();
  await h.run(function* workflow() {
    // withTimeout
    try {
      yield* timeout(300, sleep(1_000));
    } catch (e) {
      if (!isTimeoutError(e)) throw e;
      h.mark("timed out");
    }
    // cancellable scope, cancelled from outside; its compensation runs in a non-cancellable scope
    const booking = yield* spawn(function* bookTrip() {
      try {
        yield* sleep(10_000); // reserve a flight, a hotel...
      } catch (e) {
        if (isCancelled(e)) h.mark(`cancelled (${e.reason.kind})`);
        throw e; // never swallow a cancellation
      } finally {
        yield* shield(
          function* refund() {
            yield* sleep(200); // the refund call runs to completion
            h.mark("refunded");
          },
          { limitMs: 2_000 },
        );
      }
    });
    yield* sleep(100);
    yield* booking.cancel("customer cancelled");
    try {
      yield* booking;
    } catch (e) {
      if (!isTaskCancelledError(e)) throw e;
      h.mark("joined: TaskCancelledError");
    }
  });
  assert.deepEqual(h.log, [
    "timed out@300",
    "cancelled (cancel)@400",
    "refunded@600",
    "joined: TaskCancelledError@600",
  ]);
  await h.expectClean();
}

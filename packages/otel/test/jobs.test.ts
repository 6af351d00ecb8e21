/**
 * Worker job spans and job metrics from a real worker: on the memory engine (virtual clock), and on
 * BullMQ with the real Redis at 127.0.0.1:6379 (skipped with one line saying how to start Redis
 * when it does not answer; failing instead with `KEEL_REQUIRE_REDIS=1`).
 */
import { constant, type Operation, run, sleep, spawn } from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import { createMemoryQueue, type Queue, useWorker, type Worker } from "@keel/worker";
import { useBullQueue } from "@keel/worker/bullmq";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import { redisUp } from "../../worker/test/redis.js";
import { idOf, type MetricPoint, only, parentOf, useOtel } from "./support/otel.js";

const otel = useOtel();

/**
 * The scenario both engines run: `ok` completes; `flaky` fails once (503) and completes on its
 * second attempt; `bad` is rejected (a TypeError is not retried).
 */
function* scenario(queue: Queue<string>, until: () => Operation<void>): Generator<unknown, void, unknown> {
  let flaky = 0;
  const worker: Worker = yield* useWorker(
    queue,
    function* handle(job) {
      yield* yield* spawn(function* lookup() {
        yield* sleep(5);
      });
      if (job.data === "flaky" && ++flaky === 1) throw Object.assign(new Error("busy"), { status: 503 });
      if (job.data === "bad") throw new TypeError("invalid");
    },
    { concurrency: 1, timeoutMs: 10_000, retry: { attempts: 3, backoff: constant(20) } },
  );
  yield* queue.add("ok", { id: "j-ok", ttlMs: 60_000 });
  yield* queue.add("flaky", { id: "j-flaky", ttlMs: 60_000 });
  yield* queue.add("bad", { id: "j-bad", ttlMs: 60_000 });
  for (;;) {
    const s = yield* worker.stats();
    if (s.completed + s.deadLettered.rejected >= 3) return;
    yield* until();
  }
}

const jobSpans = (spans: ReadableSpan[], queue: string) =>
  spans
    .filter((s) => s.name === `job ${queue}`)
    .map((s) => ({
      id: s.attributes["keel.job.id"],
      attempt: `${s.attributes["keel.job.attempt"]}/${s.attributes["keel.job.attempts"]}`,
      outcome: s.attributes["keel.job.outcome"],
      error: s.status.code === 2 ? s.status.message : null,
    }))
    .sort((a, b) => `${a.id} ${a.attempt}`.localeCompare(`${b.id} ${b.attempt}`));

/** What both engines must show: one span per attempt with k of N and its outcome, and the metrics. */
async function expectJobTelemetry(queue: string): Promise<void> {
  const spans = otel.spans();
  expect(jobSpans(spans, queue)).toEqual([
    { id: "j-bad", attempt: "1/3", outcome: "dead-letter", error: "invalid" },
    { id: "j-flaky", attempt: "1/3", outcome: "retry", error: "busy" },
    { id: "j-flaky", attempt: "2/3", outcome: "complete", error: null },
    { id: "j-ok", attempt: "1/3", outcome: "complete", error: null },
  ]);
  for (const s of spans.filter((x) => x.name === `job ${queue}`)) {
    expect(s.kind).toBe(4); // CONSUMER
    expect(s.attributes["keel.job.queue"]).toBe(queue);
    // The job's deadline (a 60 s ttl) or the worker's timeoutMs, whichever is first.
    const left = s.attributes["keel.deadline.left_ms"] as number;
    expect(left).toBeGreaterThan(9_000);
    expect(left).toBeLessThanOrEqual(10_000);
    // A delivery has no span of its own: the job's stands for it. The jobs were added in the
    // service's root task, so each delivery is a child of that context, and linked to it.
    const producer = only(spans, "service");
    expect(parentOf(s)).toBe(idOf(producer));
    expect(s.links.map((l) => l.context.spanId)).toEqual([idOf(producer)]);
    const attempt = `${queue}/${s.attributes["keel.job.id"]} attempt ${s.attributes["keel.job.attempt"]}/3`;
    expect(spans.filter((x) => x.name === attempt)).toEqual([]);
    // The delivery's deadline scope is merged into the job's span; the handler's work hangs from it.
    expect(s.attributes["keel.timeout.owner"]).toBe("timeout(10000)");
    expect(s.attributes["keel.timeout.fired"]).toBe(false);
    expect(spans.filter((x) => x.name === "timeout(10000)")).toEqual([]);
    const work = spans.filter((x) => x.name === "lookup" && parentOf(x) === idOf(s));
    expect(work, `${attempt}: the handler's lookup under the job's span`).toHaveLength(1);
  }
  const failed = spans.find((s) => s.attributes["keel.job.outcome"] === "dead-letter")!;
  expect(failed.attributes["keel.job.reason"]).toBe("rejected");
  expect(failed.events.map((e) => e.name)).toContain("exception");

  const m = await otel.metricPoints();
  const byOutcome = (points: MetricPoint[] | undefined) =>
    Object.fromEntries(
      (points ?? [])
        .filter((p) => p.attributes["keel.job.queue"] === queue)
        .map((p) => [p.attributes["keel.job.outcome"], p.value]),
    );
  expect(byOutcome(m.get("keel.jobs"))).toEqual({ complete: 2, retry: 1, "dead-letter": 1 });
  const durations = byOutcome(m.get("keel.job.duration")) as Record<string, { count: number; min: number }>;
  expect(Object.keys(durations).sort()).toEqual(["complete", "dead-letter", "retry"]);
  expect(durations.complete!.count).toBe(2);
  expect(durations.retry!.count).toBe(1);
  // Every attempt sleeps 5 ms before its outcome.
  for (const d of Object.values(durations)) expect(d.min).toBeGreaterThanOrEqual(5);
}

describe("@keel/otel: worker jobs", () => {
  it("on the memory engine: a span per job attempt (k of N, outcome, deadline left) and the job metrics", async () => {
    await run(
      function* service() {
        const queue = yield* createMemoryQueue<string>({ name: "mail" });
        yield* scenario(queue, () => queue.idle());
      },
      { clock: createVirtualClock() },
    );
    await expectJobTelemetry("mail");
  });

  it("a job cut at shutdown: its span ends with the outcome its slot records after the delivery's task (release), counted once", async () => {
    await run(
      function* service() {
        const queue = yield* createMemoryQueue<string>({ name: "cut" });
        const s = yield* spawn(function* worker() {
          yield* useWorker(
            queue,
            function* handle() {
              yield* sleep(60_000);
            },
            { drainMs: 100, cleanupBudgetMs: 100 },
          );
          yield* sleep(Infinity);
        });
        yield* queue.add("x", { id: "j-cut", ttlMs: 600_000 });
        yield* sleep(10);
        yield* s.cancel();
      },
      { clock: createVirtualClock() },
    );
    const span = only(otel.spans(), "job cut");
    expect(span.attributes["keel.job.outcome"]).toBe("release");
    expect(span.attributes["keel.job.id"]).toBe("j-cut");
    expect(span.status.code).not.toBe(2);
    const m = await otel.metricPoints();
    const cut = (m.get("keel.jobs") ?? []).filter((p) => p.attributes["keel.job.queue"] === "cut");
    expect(cut.map((p) => `${p.attributes["keel.job.outcome"]}=${p.value}`)).toEqual(["release=1"]);
  });

  it.skipIf(!redisUp)(
    "on BullMQ with the real Redis: the same spans and metrics",
    async () => {
      const prefix = `keel-otel-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
      await run(function* service() {
        const queue = yield* useBullQueue<string>({
          name: "mail-bull",
          connection: { host: "127.0.0.1", port: 6379 },
          prefix,
        });
        try {
          yield* scenario(queue, () => sleep(20));
        } finally {
          yield* queue.obliterate();
        }
      });
      await expectJobTelemetry("mail-bull");
    },
    30_000,
  );
});

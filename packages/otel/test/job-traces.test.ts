/**
 * One trace per job: a delivery is a trace root, or a child of (and linked to) the context its job
 * was added under; no span stays open for the worker's life (its resource, slots, `deliveries`, the
 * queue's resource, `main`'s root). On the memory engine (virtual clock), and on BullMQ with the real
 * Redis, where the context travels in BullMQ's own `opts.telemetry.metadata`.
 */
import { constant, main, run, sleep, spawn } from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import { createMemoryQueue, useWorker } from "@keel/worker";
import { useBullQueue } from "@keel/worker/bullmq";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { Queue as BullQueue } from "bullmq";
import { describe, expect, it } from "vitest";
import { redisUp } from "../../worker/test/redis.js";
import { byName, idOf, only, parentOf, useOtel } from "./support/otel.js";

const otel = useOtel();

/** Spans of the worker's and queue's own tasks, which must not exist. */
const LONG_LIVED = /^(worker |queue |bullmq )|: (slot \d+|deliveries|errors|engine health)$|^extendLocks$/;

const traceOf = (s: ReadableSpan) => s.spanContext().traceId;

describe("@keel/otel: one trace per job", () => {
  it("under main: each delivery is its own trace root; no span for main's root, the worker or its slots", async () => {
    let done = false;
    await main(
      function* service() {
        const queue = yield* createMemoryQueue<string>({ name: "mail" });
        const worker = yield* useWorker(queue, function* handle() {
          yield* spawn(function* lookup() {
            yield* sleep(5);
          });
        });
        // Added by the engine directly: a producer that carries no trace context.
        for (const id of ["a", "b", "c"]) yield* queue.engine.add(id, noTrace(id));
        while ((yield* worker.stats()).completed < 3) yield* queue.idle();
        done = true;
      },
      { clock: createVirtualClock() },
    );
    expect(done).toBe(true);
    const spans = otel.spans();
    expect(spans.filter((s) => s.name === "service" || LONG_LIVED.test(s.name)).map((s) => s.name)).toEqual(
      [],
    );
    const jobs = byName(spans, "job mail");
    expect(jobs).toHaveLength(3);
    for (const job of jobs) {
      expect(parentOf(job)).toBeUndefined();
      expect(job.links).toEqual([]);
      // The handler's work is in the job's trace, under the job's span (its deadline merged in).
      const mine = spans.filter((s) => traceOf(s) === traceOf(job)).map((s) => s.name);
      expect(mine.sort()).toEqual(["job mail", "lookup"]);
      expect(
        parentOf(
          only(
            spans.filter((s) => traceOf(s) === traceOf(job)),
            "lookup",
          ),
        ),
      ).toBe(idOf(job));
    }
    expect(new Set(jobs.map(traceOf)).size).toBe(3);
  });

  it("a job added inside a span: each attempt is a child of that span, linked to it", async () => {
    await run(
      function* service() {
        const queue = yield* createMemoryQueue<string>({ name: "orders" });
        let failures = 0;
        const worker = yield* useWorker(
          queue,
          function* handle() {
            if (++failures === 1) throw Object.assign(new Error("busy"), { status: 503 });
          },
          { retry: { attempts: 2, backoff: constant(1) } },
        );
        yield* yield* spawn(function* checkout() {
          yield* queue.add("o-1", { id: "o-1" });
        });
        while ((yield* worker.stats()).completed < 1) yield* queue.idle();
      },
      { clock: createVirtualClock() },
    );
    const spans = otel.spans();
    const checkout = only(spans, "checkout");
    const attempts = byName(spans, "job orders");
    expect(attempts.map((s) => s.attributes["keel.job.outcome"]).sort()).toEqual(["complete", "retry"]);
    for (const s of attempts) {
      expect(parentOf(s)).toBe(idOf(checkout));
      expect(traceOf(s)).toBe(traceOf(checkout));
      expect(s.links.map((l) => l.context.spanId)).toEqual([idOf(checkout)]);
    }
    expect(spans.filter((s) => LONG_LIVED.test(s.name))).toEqual([]);
  });

  it.skipIf(!redisUp)(
    "on BullMQ: Keel writes the context where BullMQ's telemetry does, and honours a plain producer's",
    async () => {
      const prefix = `keel-otel-trace-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
      const connection = { host: "127.0.0.1", port: 6379 };
      const plain = new BullQueue("traced", { connection, prefix });
      const remote = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7" };
      try {
        // A plain BullMQ producer, with the metadata BullMQ's telemetry (bullmq-otel) writes.
        const traceparent = `00-${remote.traceId}-${remote.spanId}-01`;
        await plain.add(
          "job",
          { payload: "plain" },
          { jobId: "p-1", telemetry: { metadata: JSON.stringify({ traceparent }) } },
        );
        await run(function* service() {
          const queue = yield* useBullQueue<string>({ name: "traced", connection, prefix });
          const worker = yield* useWorker(queue, function* handle() {});
          yield* yield* spawn(function* checkout() {
            yield* queue.add("keel", { id: "k-1" });
          });
          while ((yield* worker.stats()).completed < 2) yield* sleep(20);
        });
        // Keel's add stored the checkout span's context in BullMQ's own option.
        const stored = (await plain.getJob("k-1"))?.opts.telemetry?.metadata;
        const checkout = only(otel.spans(), "checkout");
        expect(JSON.parse(stored ?? "{}").traceparent).toBe(`00-${traceOf(checkout)}-${idOf(checkout)}-01`);
        const jobs = byName(otel.spans(), "job traced");
        const keel = jobs.find((s) => s.attributes["keel.job.id"] === "k-1")!;
        expect(parentOf(keel)).toBe(idOf(checkout));
        const fromPlain = jobs.find((s) => s.attributes["keel.job.id"] === "p-1")!;
        expect(traceOf(fromPlain)).toBe(remote.traceId);
        expect(parentOf(fromPlain)).toBe(remote.spanId);
        expect(fromPlain.links.map((l) => l.context.spanId)).toEqual([remote.spanId]);
        expect(otel.spans().filter((s) => LONG_LIVED.test(s.name))).toEqual([]);
      } finally {
        await plain.obliterate({ force: true });
        await plain.close();
      }
    },
    30_000,
  );
});

/** Engine options for a job added with no trace context (as `queue.add` makes them). */
function noTrace(id: string) {
  return { id, deadlineAt: Infinity, attempts: undefined, priority: 0, delayMs: 0 };
}

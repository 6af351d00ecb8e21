import { createServer } from "node:http";
import {
  all,
  constant,
  createChannel,
  createCircuitBreaker,
  createRateLimiter,
  createSemaphore,
  emitEvent,
  retry,
  run,
  shield,
  sleep,
  spawn,
  suspend,
  timeout,
} from "@keel/core";
import { createHttpClient } from "@keel/core/http";
import { instrument } from "@keel/otel";
import { createVirtualClock } from "@keel/testing";
import { type Span, trace } from "@opentelemetry/api";
import { afterEach, describe, expect, it, vi } from "vitest";
import { byName, parentOf, useOtel } from "./support/otel.js";

const otel = useOtel();
afterEach(() => {
  vi.restoreAllMocks();
});
const metricPoints = () => otel.metricPoints();

function* order(tag: string) {
  yield* spawn(function* lookup() {
    yield* sleep(5);
  });
  try {
    yield* timeout(10, function* slowStock() {
      yield* sleep(100);
    });
  } catch {}
  let calls = 0;
  yield* retry(
    function* charge() {
      if (++calls === 1) throw new Error(`declined ${tag}`);
    },
    { attempts: 3, backoff: constant(1), retryOn: () => true },
  );
}

describe("@keel/otel instrument()", () => {
  it("gives two concurrent runs their own traces, parented by the context active at run()", async () => {
    const tracer = otel.provider.getTracer("app");
    const clock = createVirtualClock();
    const outer: Record<string, Span> = {};
    await Promise.all(
      ["a", "b"].map((tag) =>
        tracer.startActiveSpan(`request ${tag}`, async (span) => {
          outer[tag] = span;
          await run(() => order(tag), { clock, name: `order-${tag}` });
          span.end();
        }),
      ),
    );
    const spans = otel.spans();
    for (const tag of ["a", "b"]) {
      const traceId = outer[tag]!.spanContext().traceId;
      const mine = spans.filter((s) => s.spanContext().traceId === traceId);
      const root = byName(mine, `order-${tag}`);
      expect(root).toHaveLength(1);
      expect(parentOf(root[0]!)).toBe(outer[tag]!.spanContext().spanId);
      const rootId = root[0]!.spanContext().spanId;
      expect(root[0]!.attributes["keel.task.path"]).toMatch(new RegExp(`^order-${tag}#\\d+$`));
      const lookup = byName(mine, "lookup")[0]!;
      expect(parentOf(lookup)).toBe(rootId);
      expect(lookup.attributes["keel.task.path"]).toMatch(new RegExp(`^order-${tag}#\\d+/lookup#\\d+$`));
      // The timeout scope is a span under the task, which says it fired (and carries the event).
      const cut = byName(mine, "timeout(10)")[0]!;
      expect(parentOf(cut)).toBe(rootId);
      expect(cut.attributes).toMatchObject({
        "keel.timeout.owner": "timeout(10)",
        "keel.timeout.ms": 10,
        "keel.timeout.fired": true,
        "keel.timeout.outcome": "timed-out",
        "keel.deadline.left_ms": 10,
      });
      expect(cut.events.map((e) => e.name)).toEqual(["keel.timeout", "keel.cancel", "exception"]);
      expect(cut.status).toMatchObject({ code: 2, message: "timeout(10): timed out after 10 ms" });
      // The retry scope, and under it one span per attempt with k of N; the failed one in error.
      const retryScope = byName(mine, "retry(charge)")[0]!;
      expect(parentOf(retryScope)).toBe(rootId);
      expect(retryScope.events.map((e) => e.name)).toEqual(["keel.retry"]);
      const attempts = mine.filter((s) => s.name.startsWith("retry(charge) attempt"));
      expect(
        attempts.map((s) => [s.attributes["keel.retry.attempt"], s.attributes["keel.retry.attempts"]]),
      ).toEqual([
        [1, 3],
        [2, 3],
      ]);
      expect(attempts.every((s) => parentOf(s) === retryScope.spanContext().spanId)).toBe(true);
      expect(attempts[0]!.status).toMatchObject({ code: 2, message: `declined ${tag}` });
      expect(attempts[1]!.status.code).toBe(0);
    }
    // Nothing of one run landed in the other's trace.
    const traces = new Set(spans.map((s) => s.spanContext().traceId));
    expect(traces.size).toBe(2);
  });

  it("makes a client span per HTTP attempt, with its phases, and sends its traceparent", async () => {
    const received: (string | undefined)[] = [];
    const server = createServer((req, res) => {
      received.push(req.headers.traceparent as string | undefined);
      res.statusCode = received.length === 1 ? 503 : 200;
      res.end("{}");
    }).listen(0, "127.0.0.1");
    await new Promise((r) => server.once("listening", r));
    const { port } = server.address() as { port: number };
    try {
      await run(function* fetchOrders() {
        const client = yield* createHttpClient({
          baseUrl: `http://127.0.0.1:${port}`,
          retry: { attempts: 2, backoff: constant(0) },
        });
        yield* client.getJson("/orders?page=2");
      });
    } finally {
      server.close();
    }
    const spans = otel.spans();
    const http = byName(spans, "GET");
    expect(http).toHaveLength(2);
    for (const [i, s] of http.entries()) {
      expect(s.kind).toBe(2); // CLIENT
      expect(s.attributes).toMatchObject({
        "http.request.method": "GET",
        "url.full": `http://127.0.0.1:${port}/orders?page=2`,
        "server.address": "127.0.0.1",
        "server.port": port,
        "http.response.status_code": i === 0 ? 503 : 200,
      });
      const sc = s.spanContext();
      expect(received[i]).toBe(`00-${sc.traceId}-${sc.spanId}-01`);
      expect(spans.filter((p) => parentOf(p) === sc.spanId).map((p) => p.name)).toEqual([
        "connect",
        "headers",
        "body",
      ]);
    }
    expect(http[0]!.attributes["error.type"]).toBe("503");
    expect(http[0]!.status.code).toBe(2);
    expect(http[1]!.attributes["error.type"]).toBeUndefined();
    // Each attempt's request is under that attempt's span, under the task.
    const attempts = spans.filter((s) => /attempt \d$/.test(s.name));
    expect(http.map(parentOf)).toEqual(attempts.map((s) => s.spanContext().spanId));
    const duration = (await metricPoints()).get("http.client.request.duration")!;
    expect(duration.map((p) => p.attributes["http.response.status_code"]).sort()).toEqual([200, 503]);
    expect(duration.find((p) => p.attributes["http.response.status_code"] === 503)!.attributes).toMatchObject(
      {
        "error.type": "503",
        "http.request.method": "GET",
        "server.address": "127.0.0.1",
      },
    );
  });

  it("records the metrics table: tasks, cancellations, timeouts, retries, cleanup, breaker, queues, jobs", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const clock = createVirtualClock();
    const sem = createSemaphore(1, { name: "db" });
    const ch = createChannel<number>({ capacity: 2, name: "jobs" });
    const breaker = createCircuitBreaker({ name: "pay", failureThreshold: 1, halfOpenAfterMs: 1000 });
    await run(
      function* () {
        yield* order("m");
        const hold = () => sem.use(() => sleep(7));
        yield* all([hold, hold]);
        yield* ch.send(1);
        yield* ch.send(2);
        try {
          yield* breaker.run(function* () {
            throw new Error("down");
          });
        } catch {}
        yield* emitEvent({ type: "worker:job", queue: "mail", jobId: "m1", attempt: 1, transition: "start" });
        yield* emitEvent({
          type: "worker:job",
          queue: "mail",
          jobId: "m1",
          attempt: 1,
          transition: "complete",
          durationMs: 12,
        });
        const stubborn = yield* spawn(function* stubborn() {
          try {
            yield* suspend();
          } finally {
            yield* sleep(1000);
          }
        });
        yield* sleep(1);
        yield* stubborn.cancel();
      },
      { clock, cleanupBudgetMs: 50 },
    );
    const m = await metricPoints();
    const sum = (name: string) => (m.get(name) ?? []).reduce((a, p) => a + (p.value as number), 0);
    expect(sum("keel.tasks.live")).toBe(0);
    expect(
      m
        .get("keel.cancellations")!
        .map((p) => p.attributes["keel.cancel.reason"])
        .sort(),
    ).toEqual(["cancel", "timeout"]);
    expect(sum("keel.timeouts")).toBe(1);
    expect(sum("keel.retries")).toBe(1);
    expect(sum("keel.cleanup.overruns")).toBe(1);
    expect(m.get("keel.breaker.state")).toEqual([{ attributes: { "keel.breaker.name": "pay" }, value: 2 }]);
    expect(m.get("keel.semaphore.wait.duration")![0]).toMatchObject({
      attributes: { "keel.semaphore.name": "db" },
      value: { count: 1, sum: 7 },
    });
    expect(m.get("keel.channel.depth")).toEqual([{ attributes: { "keel.channel.name": "jobs" }, value: 2 }]);
    expect(m.get("keel.jobs")).toEqual([
      { attributes: { "keel.job.queue": "mail", "keel.job.outcome": "complete" }, value: 1 },
    ]);
    expect(m.get("keel.job.duration")![0]).toMatchObject({ value: { count: 1, sum: 12 } });
    // The job's span, and the cleanup overrun as an event on the stubborn task's span.
    const spans = otel.spans();
    expect(byName(spans, "job mail")[0]!.attributes).toMatchObject({
      "keel.job.id": "m1",
      "keel.job.outcome": "complete",
    });
    const stubborn = byName(spans, "stubborn")[0]!;
    expect(stubborn.events.map((e) => e.name)).toEqual(["keel.cancel", "keel.cleanup.overrun"]);
    expect(stubborn.attributes).toMatchObject({
      "keel.task.state": "cancelled",
      "keel.cancel.reason": "cancel",
    });
  });

  it("records queue gauges and waits (semaphore, rate limiter) and abandonments", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const sem = createSemaphore(1, { name: "db" });
    const limiter = createRateLimiter({ perSecond: 10, burst: 1, name: "api" });
    await run(
      function* () {
        const hold = () => sem.use(() => sleep(7));
        yield* all([hold, hold, hold]);
        yield* all([() => limiter.take(), () => limiter.take()]);
        // A flush that swallows every cancellation: cut at the budget, then abandoned.
        const stubborn = yield* spawn(function* owner() {
          try {
            yield* suspend();
          } finally {
            yield* shield(function* flush() {
              for (;;) {
                try {
                  yield* sleep(30);
                } catch {}
              }
            });
          }
        });
        yield* sleep(1);
        yield* stubborn.cancel();
      },
      { clock: createVirtualClock(), cleanupBudgetMs: 50 },
    );
    const m = await metricPoints();
    // Two queued behind the first holder; the gauge's last reading is after the last acquire.
    expect(m.get("keel.semaphore.waiters")).toEqual([
      { attributes: { "keel.semaphore.name": "db" }, value: 0 },
    ]);
    expect(m.get("keel.semaphore.wait.duration")![0]).toMatchObject({ value: { count: 2, sum: 7 + 14 } });
    expect(m.get("keel.limiter.waiters")).toEqual([{ attributes: { "keel.limiter.name": "api" }, value: 0 }]);
    expect(m.get("keel.limiter.wait.duration")![0]).toMatchObject({
      attributes: { "keel.limiter.name": "api" },
      value: { count: 1, sum: 100 },
    });
    const sum = (name: string) => (m.get(name) ?? []).reduce((a, p) => a + (p.value as number), 0);
    expect(sum("keel.cleanup.abandonments")).toBe(1);
    expect(sum("keel.tasks.live")).toBe(0);
  });

  it("records a failed task's error with status, and nothing once stopped", async () => {
    await run(function* failing() {
      throw new Error("boom");
    }).catch(() => {});
    const failed = byName(otel.spans(), "failing")[0]!;
    expect(failed.status).toEqual({ code: 2, message: "boom" });
    expect(failed.events.map((e) => e.name)).toEqual(["exception"]);
    otel.stop();
    otel.exporter.reset();
    await run(function* quiet() {
      yield* sleep(1);
    });
    expect(otel.spans()).toEqual([]);
    expect(trace.getActiveSpan()).toBeUndefined();
  });

  it("refuses options that are not providers", () => {
    expect(() => instrument({ tracerProvider: {} as never })).toThrow(
      /instrument\(\{ tracerProvider \}\).*getTracer/,
    );
    expect(() => instrument({ meterProvider: 1 as never })).toThrow(TypeError);
    expect(() => instrument(null as never)).toThrow(/instrument\(options\)/);
  });
});

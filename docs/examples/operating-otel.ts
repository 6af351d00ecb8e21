/**
 * Operating Keel: OpenTelemetry traces and metrics with `@keel/otel`, on the SDK's in-memory
 * exporters. A request handler calls a flaky HTTP service through Keel's client, under a timeout;
 * the trace shows the handler, the timeout scope, the retry, each attempt, each HTTP request and
 * its phases, with the deadline left at each one's start, and the service received
 * the `traceparent` of the request that reached it.
 */
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { constant, run, timeout } from "@keel/core";
import { createHttpClient } from "@keel/core/http";
import { instrument } from "@keel/otel";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";

// 1. The SDK: a context manager (so that the context active at `run()` is known), a tracer provider
//    and a meter provider. In production, the OTLP exporters take the in-memory ones' place.
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const spans = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 60_000 });
const meterProvider = new MeterProvider({ readers: [reader] });

// 2. One call, once per process: every run and `main` from here on is traced.
const stop = instrument({ tracerProvider, meterProvider });

// A service that fails its first call, and shows the trace context it received.
const traceparents: string[] = [];
const service = createServer((req, res) => {
  traceparents.push(String(req.headers.traceparent));
  res.statusCode = traceparents.length === 1 ? 503 : 200;
  res.end(JSON.stringify({ stock: 3 }));
}).listen(0, "127.0.0.1");
await new Promise((r) => service.once("listening", r));
const { port } = service.address() as { port: number };

// 3. The handler runs inside the span of an incoming request: its root span is that span's child.
const tracer = tracerProvider.getTracer("shop");
await tracer.startActiveSpan("POST /orders", async (incoming) => {
  await run(function* placeOrder() {
    const inventory = yield* createHttpClient({
      baseUrl: `http://127.0.0.1:${port}`,
      retry: { attempts: 3, backoff: constant(0) },
    });
    // A timeout scope is a span too; every span under it carries the deadline left at its start.
    return yield* timeout(5_000, inventory.getJson("/stock/42"), { label: "stock" });
  });
  incoming.end();
});
service.close();

const finished = spans.getFinishedSpans();
const traceId = finished[0]!.spanContext().traceId;
assert.ok(
  finished.every((s) => s.spanContext().traceId === traceId),
  "one trace",
);
const tree = (parent: string | undefined, depth: number): string[] =>
  finished
    .filter((s) => s.parentSpanContext?.spanId === parent)
    .flatMap((s) => {
      const status = s.attributes["http.response.status_code"];
      const line = `${"  ".repeat(depth)}${s.name}${status ? ` ${status}` : ""}`;
      return [line, ...tree(s.spanContext().spanId, depth + 1)];
    });
console.log(tree(undefined, 0).join("\n"));
// POST /orders
//   placeOrder
//     timeout(5000, stock)
//       retry(GET /stock/42)
//         retry(GET /stock/42) attempt 1
//           GET 503
//             connect
//             headers
//             body
//         retry(GET /stock/42) attempt 2
//           GET 200
//             connect
//             headers
//             body
//     httpClient                      (the client's pool: a resource task, named)

// The timeout scope's span says what it was and that it did not fire; the spans under it carry
// what was left of its 5 s when each started (`keel.deadline.left_ms`).
const scope = finished.find((s) => s.name === "timeout(5000, stock)")!;
assert.equal(scope.attributes["keel.timeout.ms"], 5000);
assert.equal(scope.attributes["keel.timeout.fired"], false);
for (const s of finished.filter((x) => x.name === "GET" || x.name.includes("attempt"))) {
  const left = s.attributes["keel.deadline.left_ms"] as number;
  assert.ok(left > 0 && left <= 5000, `${s.name}: ${left} ms left`);
}

// The service received the trace context of the HTTP span that called it.
const http = finished.filter((s) => s.name === "GET");
assert.deepEqual(
  traceparents,
  http.map((s) => `00-${s.spanContext().traceId}-${s.spanContext().spanId}-01`),
);

// 4. Metrics: one point per attempt in `http.client.request.duration`, live tasks back to 0.
await reader.forceFlush();
const metrics = metricExporter.getMetrics().flatMap((rm) => rm.scopeMetrics.flatMap((sm) => sm.metrics));
const duration = metrics.find((m) => m.descriptor.name === "http.client.request.duration")!;
console.log(duration.dataPoints.map((p) => p.attributes["http.response.status_code"])); // [503, 200]
const live = metrics.find((m) => m.descriptor.name === "keel.tasks.live")!;
assert.equal(live.dataPoints[0]!.value, 0);

stop();
await meterProvider.shutdown();
context.disable();
trace.disable();

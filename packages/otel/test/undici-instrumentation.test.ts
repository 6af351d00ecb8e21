/**
 * Beside OpenTelemetry's own undici instrumentation (the real one, registered as an application
 * would): a request sent with `@keel/core/http` gets one client span (the instrumentation's), under
 * the Keel task that sent it, and the server receives exactly one `traceparent`, naming that span.
 */
import { createServer, type IncomingMessage } from "node:http";
import { constant, run } from "@keel/core";
import { createHttpClient } from "@keel/core/http";
import { propagation } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { UndiciInstrumentation } from "@opentelemetry/instrumentation-undici";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { byName, idOf, only, parentOf, useOtel } from "./support/otel.js";

const otel = useOtel();
let instrumentation: UndiciInstrumentation;

beforeEach(() => {
  // What an application's OpenTelemetry setup does: the W3C propagator, the instrumentation on.
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  // Enabled at construction, as `registerInstrumentations` has it (it reads `enabled` per request).
  instrumentation = new UndiciInstrumentation();
  instrumentation.setTracerProvider(otel.provider);
});
afterEach(() => {
  instrumentation.disable();
  propagation.disable();
});

describe("@keel/otel beside @opentelemetry/instrumentation-undici", () => {
  it("one client span per attempt (the instrumentation's, under the attempt) and one traceparent naming it", async () => {
    const received: string[][] = [];
    const server = createServer((req, res) => {
      received.push(traceparentsOf(req));
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
        yield* client.getJson("/orders");
      });
    } finally {
      server.close();
    }
    const spans = otel.spans();
    const clients = spans.filter((s) => s.kind === 2); // CLIENT
    expect(clients.map((s) => s.instrumentationScope.name)).toEqual([
      "@opentelemetry/instrumentation-undici",
      "@opentelemetry/instrumentation-undici",
    ]);
    // Keel made no request span nor phases of its own.
    expect(spans.filter((s) => ["connect", "headers", "body"].includes(s.name))).toEqual([]);
    expect(received.map((r) => r.length)).toEqual([1, 1]);
    const task = only(spans, "fetchOrders");
    const attempts = spans.filter((s) => /attempt \d$/.test(s.name));
    for (const [i, client] of clients.entries()) {
      // The server's parent is the instrumentation's span, in the task's trace, under its attempt.
      expect(received[i]![0]).toBe(`00-${client.spanContext().traceId}-${idOf(client)}-01`);
      expect(client.spanContext().traceId).toBe(task.spanContext().traceId);
      expect(parentOf(client)).toBe(idOf(attempts[i]!));
      expect(client.attributes["http.response.status_code"]).toBe(i === 0 ? 503 : 200);
    }
    // The duration metric is the instrumentation's: Keel records none for these requests.
    expect((await otel.metricPoints()).get("http.client.request.duration") ?? []).toEqual([]);
    expect(byName(spans, "GET")).toHaveLength(2);
  });
});

/** The values of every `traceparent` header line of `req`. */
function traceparentsOf(req: IncomingMessage): string[] {
  const out: string[] = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2)
    if (req.rawHeaders[i]!.toLowerCase() === "traceparent") out.push(req.rawHeaders[i + 1]!);
  return out;
}

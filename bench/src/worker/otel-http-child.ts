/**
 * One sample of the OTel worker benchmark: `kind` runs `warmup` + `jobs` jobs of two HTTP GETs each
 * (to the parent's server at `url`) with `concurrency`, from the queue `bench` under `prefix`, and
 * prints one JSON line (`runMs`, `cpuMs`: this process's CPU while timed).
 *
 * Every OTel kind sets OpenTelemetry up as an application would (a tracer provider whose batch
 * processor hands spans to an exporter that drops them, the async-hooks context manager, the W3C
 * propagator), with `@opentelemetry/instrumentation-undici` registered unless the kind says not:
 * - `keel`: `useWorker` over `useBullQueue`, `@keel/otel`'s `instrument()`, requests through
 *   `@keel/core/http` (Keel steps aside for the instrumentation: its client spans are undici's);
 * - `keel-own`: the same without the undici instrumentation (Keel's own client spans and phases);
 * - `keel-off`: the same with no OpenTelemetry at all;
 * - `plain`: a BullMQ `Worker` whose processor opens a consumer span per job (active while it runs)
 *   and sends the two requests with undici's `request`, the instrumentation making their spans.
 * @module
 */
import { action, run } from "@keel/core";
import { createHttpClient } from "@keel/core/http";
import { useWorker } from "@keel/worker";
import { useBullQueue } from "@keel/worker/bullmq";
import { context, propagation, SpanKind, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { UndiciInstrumentation } from "@opentelemetry/instrumentation-undici";
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import { Worker } from "bullmq";
import { Agent, request } from "undici";

const [kind, jobsArg, concurrencyArg, warmupArg, prefix, url] = process.argv.slice(2) as string[];
const jobs = Number(jobsArg);
const concurrency = Number(concurrencyArg);
const warmup = Number(warmupArg);
const total = warmup + jobs;
const connection = { host: "127.0.0.1", port: 6379, maxRetriesPerRequest: null };

/** Spans are built, batched and handed over as a real exporter gets them, then dropped. */
const dropping: SpanExporter = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} };
const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropping)] });
if (kind !== "keel-off") {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
}
if (kind === "keel" || kind === "plain") new UndiciInstrumentation().setTracerProvider(provider);
if (kind === "keel" || kind === "keel-own")
  (await import("@keel/otel")).instrument({ tracerProvider: provider });

const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});
let t1 = 0;
let cpu0 = process.cpuUsage();
let cpu = cpu0;
let handled = 0;
let allHandled: (() => void) | null = null;
function counted(): void {
  if (++handled === warmup) {
    t1 = performance.now();
    cpu0 = process.cpuUsage();
  }
  if (handled === total) allHandled?.();
}

async function plain(): Promise<number> {
  const tracer = provider.getTracer("bench");
  const agent = new Agent();
  const get = async (path: string) => {
    const res = await request(`${url}${path}`, { dispatcher: agent });
    await res.body.text();
  };
  const worker = new Worker(
    "bench",
    (job) =>
      tracer.startActiveSpan("job bench", { kind: SpanKind.CONSUMER }, async (span) => {
        span.setAttribute("messaging.message.id", job.id ?? "");
        try {
          await get("/a");
          await get("/b");
        } finally {
          span.end();
          counted();
        }
      }),
    { connection, prefix, concurrency, autorun: false },
  );
  gc();
  let done = 0;
  const finished = new Promise<number>((resolve) =>
    worker.on("completed", () => {
      if (++done === total) {
        cpu = process.cpuUsage(cpu0);
        resolve(performance.now() - t1);
      }
    }),
  );
  void worker.run();
  const runMs = await finished;
  await worker.close();
  await agent.close();
  return runMs;
}

const runMs =
  kind === "plain"
    ? await plain()
    : await run(function* keel() {
        const queue = yield* useBullQueue<number>({ name: "bench", connection, prefix });
        const client = yield* createHttpClient({ baseUrl: url });
        gc();
        yield* useWorker(
          queue,
          function* handle() {
            yield* (yield* client.get("/a")).text();
            yield* (yield* client.get("/b")).text();
            counted();
          },
          { concurrency },
        );
        yield* action<void>((resolve) => {
          allHandled = resolve;
          if (handled === total) resolve();
          return () => {};
        });
        while ((yield* queue.counts()).completed < total);
        cpu = process.cpuUsage(cpu0);
        return performance.now() - t1;
      });
await provider.shutdown();
console.log(JSON.stringify({ runMs, cpuMs: (cpu.user + cpu.system) / 1000 }));

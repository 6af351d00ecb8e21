/**
 * `instrument`: OpenTelemetry traces and metrics for every Keel run in the process.
 * @module
 */
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { KEEL_CHANNELS, type KeelEvent } from "@keel/core";
import {
  type MeterProvider,
  metrics,
  type TextMapPropagator,
  type TracerProvider,
  trace,
} from "@opentelemetry/api";
import { KeelMetrics } from "./metrics.js";
import { SpanTracker } from "./spans.js";

/**
 * Where `instrument` sends what it records.
 *
 * @example
 * ```ts
 * import { instrument, type InstrumentOptions } from "@keel/otel";
 * import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
 * const exporter = new InMemorySpanExporter();
 * const options: InstrumentOptions = {
 *   tracerProvider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
 * };
 * const stop = instrument(options);
 * stop();
 * console.log(exporter.getFinishedSpans().length); // 0
 * ```
 */
export interface InstrumentOptions {
  /** Default: the global one (`trace.getTracerProvider()`), read at this call. */
  readonly tracerProvider?: TracerProvider;
  /** Default: the global one (`metrics.getMeterProvider()`), read at this call. */
  readonly meterProvider?: MeterProvider;
  /**
   * Writes trace context into outgoing HTTP requests. Default: the global propagator when one is
   * set, else W3C `traceparent` and `tracestate`.
   */
  readonly propagator?: TextMapPropagator;
  /**
   * Who makes the client span of a request sent with `@keel/core/http`, and writes its
   * `traceparent`: `"auto"` (the default) steps aside for undici's own instrumentation
   * (`@opentelemetry/instrumentation-undici`) when it is registered (something subscribes to
   * `undici:request:create` as the request is sent), else Keel does; `"keel"` always Keel (its
   * client span with a child per phase); `"undici"` always the instrumentation. Keel makes the
   * instrumentation's span a child of the task that sent the request either way, so there is one
   * client span and one `traceparent` per attempt.
   */
  readonly httpClientSpans?: "auto" | "keel" | "undici";
}

/** The package's name and version, as OpenTelemetry's instrumentation scope. */
const SCOPE = "@keel/otel";
const VERSION = "0.1.0";

/**
 * Starts recording Keel's spans and metrics from its diagnostics channels, for every run and `main`
 * in the process (those started before this call included, from their next event); returns the
 * function that stops it.
 *
 * A root task's span is parented by the OpenTelemetry context active where `run()` (or `main()`)
 * was called; every other span by the task tree. Nothing is recorded, and Keel builds no event,
 * once every subscriber has stopped.
 *
 * @example
 * ```ts
 * import { run, sleep } from "@keel/core";
 * import { instrument } from "@keel/otel";
 * import { createVirtualClock } from "@keel/testing";
 * import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
 * const exporter = new InMemorySpanExporter();
 * const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
 * const stop = instrument({ tracerProvider });
 * await run(function* checkout() {
 *   yield* sleep(10);
 * }, { clock: createVirtualClock() });
 * stop();
 * await tracerProvider.forceFlush(); // lets the exporter finish (it completes on a host timer)
 * console.log(exporter.getFinishedSpans().map((s) => s.name)); // ["checkout"]
 * ```
 * @throws `TypeError` naming the option when `tracerProvider`, `meterProvider` or `propagator` is
 * not one.
 */
export function instrument(options: InstrumentOptions = {}): () => void {
  if (typeof options !== "object" || options === null)
    throw new TypeError(
      `instrument(options): expected an object, got ${options === null ? "null" : typeof options}`,
    );
  const { tracerProvider, meterProvider, propagator, httpClientSpans = "auto" } = options;
  if (!["auto", "keel", "undici"].includes(httpClientSpans))
    throw new TypeError(
      `instrument({ httpClientSpans }): expected "auto", "keel" or "undici", got ${String(httpClientSpans)}`,
    );
  check("tracerProvider", tracerProvider, "getTracer");
  check("meterProvider", meterProvider, "getMeter");
  check("propagator", propagator, "inject");
  const tracer = (tracerProvider ?? trace.getTracerProvider()).getTracer(SCOPE, VERSION);
  const meter = (meterProvider ?? metrics.getMeterProvider()).getMeter(SCOPE, VERSION);
  const recorder = new KeelMetrics(meter);
  const spans = new SpanTracker(tracer, recorder, propagator ?? null, httpClientSpans);
  const onEvent = (message: unknown) => {
    const e = message as KeelEvent;
    try {
      spans.handle(e);
      recorder.record(e);
    } catch (error) {
      console.error("keel/otel: recording an event failed", e.type, error);
    }
  };
  const names = Object.values(KEEL_CHANNELS);
  for (const name of names) subscribe(name, onEvent);
  let stopped = false;
  return () => {
    if (stopped) return;
    stopped = true;
    for (const name of names) unsubscribe(name, onEvent);
  };
}

function check(option: string, value: unknown, method: string): void {
  if (value === undefined) return;
  if (
    typeof value !== "object" ||
    value === null ||
    typeof (value as Record<string, unknown>)[method] !== "function"
  )
    throw new TypeError(
      `instrument({ ${option} }): expected an object with ${method}(), got ${value === null ? "null" : typeof value}`,
    );
}

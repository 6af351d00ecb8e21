/**
 * The real OpenTelemetry SDK for a test file: an in-memory span exporter and metric exporter, a
 * context manager, and `instrument` started before each test and stopped after it.
 */
import { instrument } from "@keel/otel";
import { context } from "@opentelemetry/api";
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
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterAll, afterEach, beforeAll, beforeEach } from "vitest";

export interface MetricPoint {
  attributes: Record<string, unknown>;
  value: unknown;
}

export interface Otel {
  readonly exporter: InMemorySpanExporter;
  readonly provider: BasicTracerProvider;
  /** Stops `instrument` (again after each test: a second call does nothing). */
  stop(): void;
  spans(): ReadableSpan[];
  /** Every metric's points by name, collected now. */
  metricPoints(): Promise<Map<string, MetricPoint[]>>;
}

export function useOtel(): Otel {
  const contextManager = new AsyncLocalStorageContextManager();
  let exporter!: InMemorySpanExporter;
  let metricExporter!: InMemoryMetricExporter;
  let reader!: PeriodicExportingMetricReader;
  let provider!: BasicTracerProvider;
  let stop = () => {};
  beforeAll(() => {
    context.setGlobalContextManager(contextManager.enable());
  });
  afterAll(() => {
    context.disable();
  });
  beforeEach(() => {
    exporter = new InMemorySpanExporter();
    provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
    stop = instrument({ tracerProvider: provider, meterProvider: new MeterProvider({ readers: [reader] }) });
  });
  afterEach(() => stop());
  return {
    get exporter() {
      return exporter;
    },
    get provider() {
      return provider;
    },
    stop: () => stop(),
    spans: () => exporter.getFinishedSpans(),
    async metricPoints() {
      await reader.forceFlush();
      const out = new Map<string, MetricPoint[]>();
      for (const rm of metricExporter.getMetrics())
        for (const sm of rm.scopeMetrics)
          for (const m of sm.metrics)
            out.set(
              m.descriptor.name,
              m.dataPoints.map((p) => ({ attributes: p.attributes, value: p.value })),
            );
      return out;
    },
  };
}

export const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;
export const idOf = (s: ReadableSpan) => s.spanContext().spanId;
export const byName = (spans: ReadableSpan[], name: string) => spans.filter((s) => s.name === name);

/** The span named `name`, failing the test when there is not exactly one. */
export function only(spans: ReadableSpan[], name: string): ReadableSpan {
  const found = byName(spans, name);
  if (found.length !== 1)
    throw new Error(`expected one span ${name}, got ${found.length}: ${spans.map((s) => s.name).join(", ")}`);
  return found[0]!;
}

/** The span tree under `root` as indented names, children in start order. */
export function tree(spans: ReadableSpan[], root: ReadableSpan, depth = 0): string[] {
  const children = spans
    .filter((s) => parentOf(s) === idOf(root))
    .sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]);
  return [`${"  ".repeat(depth)}${root.name}`, ...children.flatMap((c) => tree(spans, c, depth + 1))];
}

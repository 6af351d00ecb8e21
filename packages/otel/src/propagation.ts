/**
 * Trace context for outgoing HTTP requests: the global propagator when one is set, else W3C
 * `traceparent`/`tracestate` written here.
 * @module
 */
import { type Context, propagation, type Span, type TextMapPropagator, trace } from "@opentelemetry/api";

/**
 * Writes `span`'s trace context into a request through `setHeader`. With no propagator given, the
 * global one is used when it writes anything (`fields()` is empty for OpenTelemetry's no-op one);
 * otherwise the W3C headers are written directly, so propagation works with a bare SDK setup.
 */
export function injectTraceContext(
  parent: Context,
  span: Span,
  setHeader: (name: string, value: string) => void,
  propagator: TextMapPropagator | null,
): void {
  const ctx = trace.setSpan(parent, span);
  const carrier: Record<string, string> = {};
  const chosen = propagator ?? (propagation.fields().length > 0 ? propagation : null);
  if (chosen) chosen.inject(ctx, carrier, { set: (c, k, v) => (c[k] = String(v)) });
  else {
    const sc = span.spanContext();
    carrier.traceparent = `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, "0")}`;
    const state = sc.traceState?.serialize();
    if (state) carrier.tracestate = state;
  }
  for (const [k, v] of Object.entries(carrier)) setHeader(k, v);
}

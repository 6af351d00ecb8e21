/**
 * Trace context in and out of Keel: into outgoing HTTP requests and into jobs as they are added,
 * out of a job as it is delivered. The propagator given to `instrument`, else the global one when
 * one is set, else W3C `traceparent`/`tracestate` read and written here (so propagation works with
 * a bare SDK setup).
 * @module
 */
import {
  type Context,
  createTraceState,
  defaultTextMapGetter,
  propagation,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  type TextMapPropagator,
  trace,
} from "@opentelemetry/api";

/** The propagator to use: the given one, else the global one when it writes anything. */
function chosen(propagator: TextMapPropagator | null): TextMapPropagator | null {
  // `fields()` is empty for OpenTelemetry's no-op propagator.
  return propagator ?? (propagation.fields().length > 0 ? propagation : null);
}

/** Writes `span`'s trace context into a request through `setHeader`. */
export function injectTraceContext(
  parent: Context,
  span: Span,
  setHeader: (name: string, value: string) => void,
  propagator: TextMapPropagator | null,
): void {
  injectContext(trace.setSpan(parent, span), setHeader, propagator);
}

/** Writes `ctx`'s trace context through `set`; nothing when it holds no valid span context. */
export function injectContext(
  ctx: Context,
  set: (name: string, value: string) => void,
  propagator: TextMapPropagator | null,
): void {
  const carrier: Record<string, string> = {};
  const p = chosen(propagator);
  if (p) p.inject(ctx, carrier, { set: (c, k, v) => (c[k] = String(v)) });
  else {
    const sc = trace.getSpanContext(ctx);
    if (!sc || !trace.isSpanContextValid(sc)) return;
    carrier.traceparent = `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, "0")}`;
    const state = sc.traceState?.serialize();
    if (state) carrier.tracestate = state;
  }
  for (const [k, v] of Object.entries(carrier)) set(k, v);
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * The remote span context a job was added under, as a parent context, with that span context (for
 * a link); null when the carrier holds none that is valid.
 */
export function extractContext(
  carrier: Readonly<Record<string, string>>,
  propagator: TextMapPropagator | null,
): { ctx: Context; span: SpanContext } | null {
  const p = chosen(propagator);
  let ctx: Context;
  if (p) ctx = p.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter);
  else {
    const m = TRACEPARENT.exec(carrier.traceparent?.trim().toLowerCase() ?? "");
    if (!m) return null;
    const sc: SpanContext = {
      traceId: m[1]!,
      spanId: m[2]!,
      traceFlags: Number.parseInt(m[3]!, 16),
      isRemote: true,
    };
    if (carrier.tracestate) sc.traceState = createTraceState(carrier.tracestate);
    ctx = trace.setSpanContext(ROOT_CONTEXT, sc);
  }
  const span = trace.getSpanContext(ctx);
  return span && trace.isSpanContextValid(span) ? { ctx, span } : null;
}

/**
 * What every kind of span shares: the deadline-left attribute and how a failure is recorded.
 * @module
 */
import { type Span, SpanStatusCode } from "@opentelemetry/api";

/** The attribute for what was left of the deadline in force when a span started. */
export const DEADLINE_LEFT = "keel.deadline.left_ms";

/** `{ keel.deadline.left_ms }` when a deadline exists (`Infinity` or absent means none). */
export function deadlineLeft(ms: number | undefined): Record<string, number> {
  return ms !== undefined && Number.isFinite(ms) ? { [DEADLINE_LEFT]: ms } : {};
}

/** Records `error` on `span` and marks it failed. */
export function fail(span: Span, error: unknown): void {
  if (error instanceof Error) span.recordException(error);
  const message = error instanceof Error ? error.message : String(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

/**
 * What spans and metrics share: the deadline-left attribute, how a failure is recorded, and the
 * name a timeout scope goes by.
 * @module
 */
import { type Span, SpanStatusCode } from "@opentelemetry/api";

/** The attribute for what was left of the deadline in force when a span started. */
export const DEADLINE_LEFT = "keel.deadline.left_ms";

/**
 * Sets `keel.deadline.left_ms` on `attributes` when a deadline exists (`Infinity` or absent means
 * none) and returns them: in place, as attributes are built on every event.
 */
export function addDeadlineLeft<A extends Record<string, unknown>>(attributes: A, ms: number | undefined): A {
  if (ms !== undefined && Number.isFinite(ms)) (attributes as Record<string, unknown>)[DEADLINE_LEFT] = ms;
  return attributes;
}

/** Records `error` on `span` and marks it failed. */
export function fail(span: Span, error: unknown): void {
  if (error instanceof Error) span.recordException(error);
  const message = error instanceof Error ? error.message : String(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

/**
 * A timeout scope's name, for a span's name and a metric's attribute: its label, but a `timeoutAt`'s
 * instant left out, so names stay few (`timeoutAt`, `timeoutAt(sync stock)`). Spans keep the full
 * label in `keel.timeout.owner`.
 */
export function timeoutName(label: string): string {
  const at = /^timeoutAt\([^,)]*(?:, (.*))?\)$/.exec(label);
  if (!at) return label;
  return at[1] === undefined ? "timeoutAt" : `timeoutAt(${at[1]})`;
}

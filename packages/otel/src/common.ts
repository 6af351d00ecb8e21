/**
 * What spans and metrics share: the deadline-left attribute, how a failure is recorded, and the
 * name a timeout scope goes by.
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

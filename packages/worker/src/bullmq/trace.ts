/**
 * A job's trace context in BullMQ's own place for it: `opts.telemetry.metadata`, which BullMQ's
 * telemetry (and its `bullmq-otel` context manager) writes as the JSON of a propagation carrier
 * (`{"traceparent":"00-…"}`). Writing it there lets a plain BullMQ consumer with telemetry continue
 * a trace Keel started, and reading it there lets a Keel worker continue one a plain producer
 * started. Kept apart from the engine's storage, so that it moves with the job's options.
 * @module
 */

/** The part of BullMQ's job options this module writes. */
export interface TelemetryOptions {
  telemetry?: { metadata?: string };
}

/** Sets `options.telemetry.metadata` to the carrier `trace`, when there is one. */
export function writeTrace<O extends TelemetryOptions>(
  options: O,
  trace: Readonly<Record<string, string>> | undefined,
): O {
  if (trace !== undefined && Object.keys(trace).length > 0)
    options.telemetry = { ...options.telemetry, metadata: JSON.stringify(trace) };
  return options;
}

/**
 * The carrier stored in a job's options: its string fields, or `{ traceparent }` for a bare W3C
 * `traceparent` (a context manager that stores only that); undefined when there is none or it
 * cannot be read (another producer's metadata is never a reason to fail a delivery).
 */
export function readTrace(opts: unknown): Readonly<Record<string, string>> | undefined {
  const metadata = (opts as { telemetry?: { metadata?: unknown } } | null | undefined)?.telemetry?.metadata;
  if (typeof metadata !== "string" || metadata === "") return undefined;
  if (/^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/i.test(metadata.trim()))
    return { traceparent: metadata.trim() };
  let parsed: unknown;
  try {
    parsed = JSON.parse(metadata);
  } catch {
    return undefined;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return undefined;
  const carrier: Record<string, string> = {};
  for (const [k, v] of Object.entries(parsed)) if (typeof v === "string") carrier[k] = v;
  return Object.keys(carrier).length > 0 ? carrier : undefined;
}

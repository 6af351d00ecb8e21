/**
 * `@keel/otel`: OpenTelemetry traces and metrics for Keel, from its diagnostics channels.
 *
 * An explicit barrel: everything public is named here.
 * @module @keel/otel
 */
export { type InstrumentOptions, instrument } from "./instrument.js";
export { workflowTraceId } from "./workflow-spans.js";

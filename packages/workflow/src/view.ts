/**
 * What `engine.get(id)` shows of an execution: its record, and its journal read for people (each
 * step with its attempts and duration, the sleeps and events it went through, what it waits on).
 * @module
 */
import { restoreError, unwrapValue } from "./json.js";
import type { ExecutionRecord, ExecutionStatus, JournalEntry } from "./store/store.js";

export interface StepView {
  /** A step's `charge#1` (`0.1/charge#1` in a spawned branch); other entries by their journal key (`sleep:#1`, `event:approved#1`). */
  readonly key: string;
  readonly kind: JournalEntry["kind"];
  readonly ok: boolean;
  /** How many times the step's operation ran in the journaled run (its retries included). */
  readonly attempts: number;
  readonly durationMs: number;
  readonly startedAt: number;
  readonly endedAt: number;
  /** The value (ok) or the error's message. */
  readonly value?: unknown;
  readonly error?: string;
}

export interface ExecutionView {
  readonly id: string;
  readonly workflow: string;
  readonly version: number;
  readonly status: ExecutionStatus;
  readonly createdAt: number;
  readonly deadlineAt: number | null;
  /** What it waits on, for a parked execution: `sleep until …`, `event "approved"`. */
  readonly waitingOn: string | null;
  readonly owner: string | null;
  readonly steps: readonly StepView[];
  readonly output?: unknown;
  readonly error?: Error;
  readonly record: ExecutionRecord;
}

export function viewOf(record: ExecutionRecord, journal: readonly JournalEntry[]): ExecutionView {
  const steps = journal
    .filter(
      (e) => e.kind === "step" || e.kind === "sleep" || (e.kind === "event" && !e.key.endsWith(":timeout")),
    )
    .map((e) => ({
      key: e.kind === "step" ? e.key.slice("step:".length) : e.key,
      kind: e.kind,
      ok: e.ok,
      attempts: e.attempts,
      durationMs: Math.round((e.endedAt - e.startedAt) * 10) / 10,
      startedAt: e.startedAt,
      endedAt: e.endedAt,
      ...(e.ok ? { value: e.kind === "step" ? unwrapValue(e.value) : e.value } : { error: e.error?.message }),
    }));
  return {
    id: record.id,
    workflow: record.workflow,
    version: record.version,
    status: record.status,
    createdAt: record.createdAt,
    deadlineAt: record.deadlineAt,
    waitingOn: record.waitingOn,
    owner: record.owner,
    steps,
    ...(record.status === "completed" ? { output: unwrapValue(record.output) } : {}),
    ...(record.error ? { error: restoreError(record.error) } : {}),
    record,
  };
}

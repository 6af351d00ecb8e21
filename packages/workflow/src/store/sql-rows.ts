/**
 * The SQL stores' rows (PostgreSQL's and SQLite's tables have the same columns) and the records
 * they make. JSON values are kept as JSON text, never as a JSON column type: text comes back exactly
 * as written (key order, `\u0000`, lone surrogates: PostgreSQL's `jsonb` reorders keys and refuses
 * both escapes), and the server spends nothing parsing what it never queries.
 * @module
 */
import type { ExecutionRecord, ExecutionStatus, JournalEntry, JsonValue, SignalRecord } from "./store.js";

/** An integer column: PostgreSQL's `bigint` arrives as a string, SQLite's as a number. */
type Int = number | string;

/** The columns of `executions` a record is made of, in SQL. */
export const EXECUTION_COLUMNS =
  "id, workflow, version, input, status, created_at, updated_at, deadline_at, wake_at, waiting_for, " +
  "waiting_on, owner, lease_until, generation, cancel_requested, output, error, ended_at";

export interface ExecutionRow {
  id: string;
  workflow: string;
  version: Int;
  input: string;
  status: string;
  created_at: Int;
  updated_at: Int;
  deadline_at: Int | null;
  wake_at: Int | null;
  /** PostgreSQL: a `text[]`; SQLite: JSON text. */
  waiting_for: string[] | string;
  waiting_on: string | null;
  owner: string | null;
  lease_until: Int | null;
  generation: Int;
  cancel_requested: string | null;
  output: string | null;
  error: string | null;
  ended_at: Int | null;
}

/** The columns of `journal` an entry is made of, in SQL. */
export const ENTRY_COLUMNS = "execution_id, key, kind, ok, value, error, attempts, started_at, ended_at";

export interface EntryRow {
  execution_id: string;
  key: string;
  kind: string;
  /** SQLite has no booleans: 0 or 1. */
  ok: boolean | number;
  value: string;
  error: string | null;
  attempts: Int;
  started_at: Int;
  ended_at: Int;
}

export const SIGNAL_COLUMNS = "execution_id, seq, name, payload, at";

export interface SignalRow {
  execution_id: string;
  seq: Int;
  name: string;
  payload: string;
  at: Int;
}

const orNull = (v: Int | null): number | null => (v === null ? null : Number(v));
const parsed = <T>(text: string | null): T | null => (text === null ? null : (JSON.parse(text) as T));

export function toRecord(r: ExecutionRow): ExecutionRecord {
  return {
    id: r.id,
    workflow: r.workflow,
    version: Number(r.version),
    input: JSON.parse(r.input) as JsonValue,
    status: r.status as ExecutionStatus,
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
    deadlineAt: orNull(r.deadline_at),
    wakeAt: orNull(r.wake_at),
    waitingFor: typeof r.waiting_for === "string" ? (JSON.parse(r.waiting_for) as string[]) : r.waiting_for,
    waitingOn: r.waiting_on,
    owner: r.owner,
    leaseUntil: orNull(r.lease_until),
    generation: Number(r.generation),
    cancelRequested: r.cancel_requested,
    output: parsed(r.output),
    error: parsed(r.error),
    endedAt: orNull(r.ended_at),
  };
}

export function toEntry(r: EntryRow): JournalEntry {
  return {
    key: r.key,
    kind: r.kind as JournalEntry["kind"],
    ok: Boolean(r.ok),
    value: JSON.parse(r.value) as JsonValue,
    error: parsed(r.error),
    attempts: Number(r.attempts),
    startedAt: Number(r.started_at),
    endedAt: Number(r.ended_at),
  };
}

export function toSignal(r: SignalRow): SignalRecord {
  return { seq: Number(r.seq), name: r.name, payload: JSON.parse(r.payload) as JsonValue, at: Number(r.at) };
}

/** Rows of several executions, by execution id, each list in the order the rows came. */
export function byExecution<R extends { execution_id: string }, T>(
  rows: readonly R[],
  make: (row: R) => T,
): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const row of rows) {
    let list = out.get(row.execution_id);
    if (list === undefined) out.set(row.execution_id, (list = []));
    list.push(make(row));
  }
  return out;
}

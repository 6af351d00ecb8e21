/**
 * The SQLite store's SQL, one statement per step of an operation, prepared once per connection.
 * SQLite runs one write transaction at a time (in the file, across processes): every operation that
 * reads before it writes does both in one `BEGIN IMMEDIATE` transaction (see `sqlite-store.ts`), so
 * what it read is still true when it writes.
 * @module
 */
import type Database from "better-sqlite3";
import { ENTRY_COLUMNS, EXECUTION_COLUMNS, SIGNAL_COLUMNS } from "../store/sql-rows.js";

const ENDED = "('completed', 'failed', 'cancelled')";
const PARKED = "('sleeping', 'waiting')";
const MINE = "id = @id AND owner = @owner AND generation = @generation";

/** The store's statements on `db` (its tables must exist). */
export function prepare(db: Database.Database): Statements {
  const s = (text: string): Database.Statement => db.prepare(text);
  // A parked execution waiting for the signal's name.
  const wakes = `status IN ${PARKED} AND EXISTS (SELECT 1 FROM json_each(waiting_for) WHERE value = @name)`;
  return {
    create: s(
      `INSERT INTO executions (id, workflow, version, input, status, created_at, updated_at, deadline_at, due_at,
                               owner, lease_until, generation)
       VALUES (@id, @workflow, @version, @input, CASE WHEN @owner IS NULL THEN 'pending' ELSE 'running' END,
               @now, @now, @deadlineAt, coalesce(@leaseUntil, @now), @owner, @leaseUntil,
               CASE WHEN @owner IS NULL THEN 0 ELSE 1 END)
       ON CONFLICT (id) DO NOTHING
       RETURNING ${EXECUTION_COLUMNS}`,
    ),
    get: s(`SELECT ${EXECUTION_COLUMNS} FROM executions WHERE id = ?`),
    /** @statuses a JSON array or null, @workflow or null. */
    list: s(
      `SELECT ${EXECUTION_COLUMNS} FROM executions
       WHERE (@statuses IS NULL OR status IN (SELECT value FROM json_each(@statuses)))
         AND (@workflow IS NULL OR workflow = @workflow)
       ORDER BY created_at DESC, id DESC LIMIT @limit`,
    ),
    /** @ids a JSON array. */
    journal: s(
      `SELECT ${ENTRY_COLUMNS} FROM journal
       WHERE execution_id IN (SELECT value FROM json_each(@ids)) ORDER BY rowid`,
    ),
    signals: s(
      `SELECT ${SIGNAL_COLUMNS} FROM signals
       WHERE execution_id IN (SELECT value FROM json_each(@ids)) ORDER BY execution_id, seq`,
    ),
    due: s(
      "SELECT id FROM executions WHERE due_at <= @now AND (@only IS NULL OR workflow || '@' || version IN " +
        "(SELECT value FROM json_each(@only))) ORDER BY due_at LIMIT @limit",
    ),
    claim: s(
      `UPDATE executions
       SET status = 'running', owner = @owner, lease_until = @leaseUntil, due_at = @leaseUntil,
           generation = generation + 1, updated_at = @now, wake_at = NULL, waiting_for = '[]', waiting_on = NULL
       WHERE id = @id
       RETURNING ${EXECUTION_COLUMNS}`,
    ),
    renew: s(`UPDATE executions SET lease_until = @leaseUntil, due_at = @leaseUntil WHERE ${MINE}`),
    current: s(`SELECT 1 FROM executions WHERE ${MINE}`),
    append: s(
      `INSERT INTO journal (${ENTRY_COLUMNS})
       VALUES (@id, @key, @kind, @ok, @value, @error, @attempts, @startedAt, @endedAt)`,
    ),
    /** Pending instead of parked when a cancel is requested or a waited-for signal is newer than @seen. */
    park: s(
      `UPDATE executions
       SET status = CASE WHEN woken THEN 'pending' ELSE @status END,
           due_at = CASE WHEN woken THEN @now ELSE @wakeAt END,
           wake_at = @wakeAt, waiting_for = @waitingFor, waiting_on = @waitingOn,
           owner = NULL, lease_until = NULL, updated_at = @now
       FROM (SELECT (cancel_requested IS NOT NULL OR EXISTS (
               SELECT 1 FROM signals WHERE execution_id = @id AND seq > @seen
                 AND name IN (SELECT value FROM json_each(@waitingFor)))) AS woken
             FROM executions WHERE id = @id)
       WHERE ${MINE}`,
    ),
    release: s(
      `UPDATE executions SET status = 'pending', owner = NULL, lease_until = NULL, due_at = @now, updated_at = @now
       WHERE ${MINE}`,
    ),
    finish: s(
      `UPDATE executions
       SET status = @status, output = @output, error = @error, owner = NULL, lease_until = NULL, wake_at = NULL,
           waiting_for = '[]', waiting_on = NULL, updated_at = @now, ended_at = @now, due_at = NULL
       WHERE ${MINE}`,
    ),
    /** Numbers the signal and wakes a parked execution waiting for its name; no row when ended. */
    signalSeq: s(
      `UPDATE executions
       SET signal_seq = signal_seq + 1,
           status = CASE WHEN ${wakes} THEN 'pending' ELSE status END,
           due_at = CASE WHEN ${wakes} THEN @now ELSE due_at END,
           updated_at = CASE WHEN ${wakes} THEN @now ELSE updated_at END
       WHERE id = @id AND status NOT IN ${ENDED}
       RETURNING signal_seq`,
    ),
    signal: s(`INSERT INTO signals (${SIGNAL_COLUMNS}) VALUES (@id, @seq, @name, @payload, @now)`),
    requestCancel: s(
      `UPDATE executions
       SET cancel_requested = @reason, updated_at = @now,
           status = CASE WHEN status IN ${PARKED} THEN 'pending' ELSE status END,
           due_at = CASE WHEN status IN ${PARKED} THEN @now ELSE due_at END
       WHERE id = @id AND cancel_requested IS NULL AND status NOT IN ${ENDED}
       RETURNING ${EXECUTION_COLUMNS}`,
    ),
    nextDueAt: s("SELECT min(due_at) AS at FROM executions WHERE due_at IS NOT NULL"),
  };
}

export type Statements = Readonly<Record<StatementName, Database.Statement>>;

type StatementName =
  | "create"
  | "get"
  | "list"
  | "journal"
  | "signals"
  | "due"
  | "claim"
  | "renew"
  | "current"
  | "append"
  | "park"
  | "release"
  | "finish"
  | "signalSeq"
  | "signal"
  | "requestCancel"
  | "nextDueAt";

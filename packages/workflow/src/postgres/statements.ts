/**
 * The PostgreSQL store's SQL, one named statement per operation. Each runs as a prepared statement
 * (its name is a hash of its text), so a connection parses and plans it once.
 *
 * Concurrency, under READ COMMITTED (PostgreSQL's default), rests on three devices:
 * - Every write of a claim names it (`owner`, `generation`) in its WHERE clause, on the execution's
 *   row; a write that waits for a concurrent update of the row re-checks it on the row's new
 *   version, so a takeover that commits first makes the old claim's write match nothing.
 * - `append` locks the execution's row `FOR KEY SHARE`, which conflicts with the claim's
 *   `FOR UPDATE` (and nothing else: renew, signal and park do not wait for it). Without it an append
 *   could read the old generation, a takeover commit and read the journal, and the append commit
 *   after: an entry written under a lost claim that the new owner never saw.
 * - `park` decides whether a signal came during the claim from `signal_last`, a column of the row,
 *   not from the signals table: a statement's subqueries see the table as it was when the statement
 *   began, so a signal committed while park waited for the row would be slept through.
 * @module
 */
import { createHash } from "node:crypto";
import { ENTRY_COLUMNS, EXECUTION_COLUMNS, SIGNAL_COLUMNS } from "../store/sql-rows.js";

/** A statement as `pg` takes it: a name makes it prepared once per connection. */
export interface Statement {
  readonly name: string;
  readonly text: string;
}

const ENDED = "('completed', 'failed', 'cancelled')";
const PARKED = "('sleeping', 'waiting')";

function named(text: string): Statement {
  return { name: `keel_${createHash("sha1").update(text).digest("hex").slice(0, 24)}`, text };
}

/** The store's statements on the tables of schema `s` (quoted). */
export function statements(s: string) {
  const mine = "id = $1 AND owner = $2 AND generation = $3";
  // Whether a signal for one of the names park waits for ($6) came after the claim's last ($8).
  const woken =
    "(cancel_requested IS NOT NULL OR EXISTS (SELECT 1 FROM jsonb_each_text(signal_last) AS l(name, seq) " +
    "WHERE l.name = ANY($6::text[]) AND l.seq::bigint > $8::bigint))";
  return {
    /**
     * $1 id, $2 workflow, $3 version, $4 input, $5 now, $6 deadlineAt, $7 owner and $8 leaseMs (both
     * null: pending; else claimed by $7): the new record, or none if the id exists.
     */
    create: named(
      `INSERT INTO ${s}.executions (id, workflow, version, input, status, created_at, updated_at, deadline_at, due_at,
                                    owner, lease_until, generation)
       VALUES ($1, $2, $3, $4, CASE WHEN $7::text IS NULL THEN 'pending' ELSE 'running' END, $5, $5, $6,
               $5::bigint + coalesce($8::bigint, 0), $7, $5::bigint + $8::bigint,
               CASE WHEN $7::text IS NULL THEN 0 ELSE 1 END)
       ON CONFLICT (id) DO NOTHING
       RETURNING ${EXECUTION_COLUMNS}`,
    ),
    get: named(`SELECT ${EXECUTION_COLUMNS} FROM ${s}.executions WHERE id = $1`),
    /** $1 statuses or null, $2 workflow or null, $3 limit. */
    list: named(
      `SELECT ${EXECUTION_COLUMNS} FROM ${s}.executions
       WHERE ($1::text[] IS NULL OR status = ANY($1::text[])) AND ($2::text IS NULL OR workflow = $2::text)
       ORDER BY created_at DESC, id COLLATE "C" DESC LIMIT $3`,
    ),
    /** $1 execution ids. */
    journal: named(
      `SELECT ${ENTRY_COLUMNS} FROM ${s}.journal WHERE execution_id = ANY($1::text[]) ORDER BY pos`,
    ),
    signals: named(
      `SELECT ${SIGNAL_COLUMNS} FROM ${s}.signals WHERE execution_id = ANY($1::text[]) ORDER BY execution_id, seq`,
    ),
    /**
     * $1 owner, $2 now, $3 leaseMs, $4 limit, $5 the `workflow@version`s to take (null: any). Rows another claimer holds are skipped, not waited
     * for; one that changed since the scan began is re-checked on its new version. The claimed ids
     * are handed to the UPDATE as an array (`= ANY (ARRAY(...))`), so it finds them by primary key
     * whatever the plan's guess of their number: joined to the CTE, the generic plan (it cannot know
     * the limit) hashed the whole table, every claim a sequential scan.
     */
    claim: named(
      `WITH due AS (
         SELECT id, due_at FROM ${s}.executions WHERE due_at <= $2::bigint
           AND ($5::text[] IS NULL OR workflow || '@' || version = ANY ($5::text[]))
         ORDER BY due_at LIMIT $4 FOR UPDATE SKIP LOCKED
       )
       UPDATE ${s}.executions e
       SET status = 'running', owner = $1, lease_until = $2::bigint + $3::bigint, due_at = $2::bigint + $3::bigint,
           generation = e.generation + 1, updated_at = $2::bigint, wake_at = NULL, waiting_for = '{}', waiting_on = NULL
       WHERE e.id = ANY (ARRAY(SELECT id FROM due))
       RETURNING ${EXECUTION_COLUMNS.replace(/(\w+)/g, "e.$1")}, e.signal_seq,
                 (SELECT due_at FROM due WHERE due.id = e.id) AS was_due`,
    ),
    /** $1 id, $2 owner, $3 generation, $4 leaseUntil. */
    renew: named(`UPDATE ${s}.executions SET lease_until = $4, due_at = $4 WHERE ${mine}`),
    /** $1..$3 the claim, $4.. the entries' columns as arrays: one statement whatever their number. */
    append: named(
      `INSERT INTO ${s}.journal (execution_id, key, kind, ok, value, error, attempts, started_at, ended_at)
       SELECT e.id, u.key, u.kind, u.ok, u.value, u.error, u.attempts, u.started_at, u.ended_at
       FROM ${s}.executions e,
            unnest($4::text[], $5::text[], $6::boolean[], $7::text[], $8::text[], $9::integer[], $10::bigint[], $11::bigint[])
              AS u(key, kind, ok, value, error, attempts, started_at, ended_at)
       WHERE e.${mine.replace(/ AND /g, " AND e.")}
       FOR KEY SHARE OF e`,
    ),
    /** $1..$3 the claim, $4..$11 one entry's columns: the common append, with scalar parameters. */
    appendOne: named(
      `INSERT INTO ${s}.journal (execution_id, key, kind, ok, value, error, attempts, started_at, ended_at)
       SELECT e.id, $4::text, $5::text, $6::boolean, $7::text, $8::text, $9::integer, $10::bigint, $11::bigint
       FROM ${s}.executions e
       WHERE e.${mine.replace(/ AND /g, " AND e.")}
       FOR KEY SHARE OF e`,
    ),
    /**
     * Appends of several claims in one statement (the store's group commit): each row names its
     * execution and claim ($1..$3), joined to the execution's row under the same fence and lock as
     * `append`; the ids of the executions that got rows come back, and one that got none lost its
     * claim. Rows go in in the arrays' order (`ORDER BY n`), so each journal's `pos` follows its
     * appends' order.
     */
    appendMany: named(
      `WITH written AS (
         INSERT INTO ${s}.journal (execution_id, key, kind, ok, value, error, attempts, started_at, ended_at)
         SELECT e.id, u.key, u.kind, u.ok, u.value, u.error, u.attempts, u.started_at, u.ended_at
         FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::boolean[], $7::text[],
                     $8::text[], $9::integer[], $10::bigint[], $11::bigint[])
                WITH ORDINALITY AS u(id, owner, generation, key, kind, ok, value, error, attempts, started_at, ended_at, n)
         JOIN ${s}.executions e ON e.id = u.id AND e.owner = u.owner AND e.generation = u.generation
         ORDER BY u.n
         FOR KEY SHARE OF e
         RETURNING execution_id
       )
       SELECT DISTINCT execution_id FROM written`,
    ),
    /** Whether the claim is current, for an append of no entries. */
    current: named(`SELECT 1 FROM ${s}.executions WHERE ${mine}`),
    /** $1..$3 the claim, $4 status, $5 wakeAt, $6 waitingFor, $7 waitingOn, $8 signalsSeen, $9 now. */
    park: named(
      `UPDATE ${s}.executions
       SET status = CASE WHEN ${woken} THEN 'pending' ELSE $4 END,
           due_at = CASE WHEN ${woken} THEN $9::bigint ELSE $5::bigint END,
           wake_at = $5, waiting_for = $6::text[], waiting_on = $7, owner = NULL, lease_until = NULL, updated_at = $9
       WHERE ${mine}`,
    ),
    /** $1..$3 the claim, $4 now. */
    release: named(
      `UPDATE ${s}.executions
       SET status = 'pending', owner = NULL, lease_until = NULL, due_at = $4, updated_at = $4
       WHERE ${mine}`,
    ),
    /** $1..$3 the claim, $4 status, $5 output, $6 error, $7 now. */
    finish: named(
      `UPDATE ${s}.executions
       SET status = $4, output = $5, error = $6, owner = NULL, lease_until = NULL, wake_at = NULL,
           waiting_for = '{}', waiting_on = NULL, updated_at = $7, ended_at = $7, due_at = NULL
       WHERE ${mine}`,
    ),
    /**
     * $1 id, $2 name, $3 payload, $4 now: the seq, or no row for an unknown or ended execution. The
     * row's update numbers the signal (concurrent signals queue on the row) and wakes a parked
     * execution waiting for the name.
     */
    signal: named(
      `WITH e AS (
         UPDATE ${s}.executions
         SET signal_seq = signal_seq + 1,
             signal_last = signal_last || jsonb_build_object($2::text, signal_seq + 1),
             status = CASE WHEN status IN ${PARKED} AND $2::text = ANY(waiting_for) THEN 'pending' ELSE status END,
             due_at = CASE WHEN status IN ${PARKED} AND $2::text = ANY(waiting_for) THEN $4::bigint ELSE due_at END,
             updated_at = CASE WHEN status IN ${PARKED} AND $2::text = ANY(waiting_for) THEN $4::bigint ELSE updated_at END
         WHERE id = $1 AND status NOT IN ${ENDED}
         RETURNING signal_seq
       )
       INSERT INTO ${s}.signals (execution_id, seq, name, payload, at)
       SELECT $1, signal_seq, $2, $3, $4 FROM e
       RETURNING seq`,
    ),
    /** $1 id, $2 reason, $3 now: the record, or no row when there was nothing to change. */
    requestCancel: named(
      `UPDATE ${s}.executions
       SET cancel_requested = $2, updated_at = $3,
           status = CASE WHEN status IN ${PARKED} THEN 'pending' ELSE status END,
           due_at = CASE WHEN status IN ${PARKED} THEN $3::bigint ELSE due_at END
       WHERE id = $1 AND cancel_requested IS NULL AND status NOT IN ${ENDED}
       RETURNING ${EXECUTION_COLUMNS}`,
    ),
    nextDueAt: named(`SELECT min(due_at) AS at FROM ${s}.executions WHERE due_at IS NOT NULL`),
  };
}

export type Statements = ReturnType<typeof statements>;

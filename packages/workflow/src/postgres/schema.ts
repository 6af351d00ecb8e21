/**
 * The PostgreSQL store's schema and its migrations, in one place. `init` runs the migrations the
 * schema has not had yet, in one transaction under an advisory lock, so that processes starting at
 * once (a fleet's deploy) do not race on `CREATE ... IF NOT EXISTS` (which is not safe against a
 * concurrent create of the same name).
 *
 * Columns, and why they are as they are:
 * - Instants are `bigint` milliseconds on the engine's clock (never the server's `now()`).
 * - JSON values are `text` (see `store/sql-rows.ts`).
 * - `due_at` is when the execution can next be claimed: a pending one's `updated_at`, a running
 *   one's lease end, a parked one's `wake_at` (null: only a signal or a cancel wakes it), null once
 *   ended. Every write keeps it so, and `claim` and `nextDueAt` are index range scans over it:
 *   100,000 sleeping executions cost a claim nothing.
 * - `signal_last` maps each signal name to its latest seq, on the execution's row, for `park`'s
 *   check (see `statements.ts`, park).
 * @module
 */
import type { Pool } from "pg";

/** The schema name as SQL: a plain identifier, quoted. */
export function quoteSchema(schema: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema))
    throw new TypeError(
      `createPostgresStore({ schema }): expected a plain identifier (letters, digits, _; at most 63), got ${JSON.stringify(schema)}`,
    );
  return `"${schema}"`;
}

/** The migrations, in order: the schema's version is how many have run. Never edit one that shipped. */
function migrations(s: string): readonly string[] {
  return [
    `CREATE TABLE ${s}.executions (
      id text PRIMARY KEY,
      workflow text NOT NULL,
      version integer NOT NULL,
      input text NOT NULL,
      status text NOT NULL,
      created_at bigint NOT NULL,
      updated_at bigint NOT NULL,
      deadline_at bigint,
      wake_at bigint,
      waiting_for text[] NOT NULL DEFAULT '{}',
      waiting_on text,
      owner text,
      lease_until bigint,
      generation bigint NOT NULL DEFAULT 0,
      cancel_requested text,
      output text,
      error text,
      ended_at bigint,
      due_at bigint,
      signal_seq bigint NOT NULL DEFAULT 0,
      signal_last jsonb NOT NULL DEFAULT '{}'
    );
    CREATE INDEX executions_due ON ${s}.executions (due_at) WHERE due_at IS NOT NULL;
    CREATE INDEX executions_created ON ${s}.executions (created_at DESC, id COLLATE "C" DESC);
    CREATE TABLE ${s}.journal (
      execution_id text NOT NULL,
      key text NOT NULL,
      pos bigint GENERATED ALWAYS AS IDENTITY,
      kind text NOT NULL,
      ok boolean NOT NULL,
      value text NOT NULL,
      error text,
      attempts integer NOT NULL,
      started_at bigint NOT NULL,
      ended_at bigint NOT NULL,
      PRIMARY KEY (execution_id, key)
    );
    CREATE TABLE ${s}.signals (
      execution_id text NOT NULL,
      seq bigint NOT NULL,
      name text NOT NULL,
      payload text NOT NULL,
      at bigint NOT NULL,
      PRIMARY KEY (execution_id, seq)
    );`,
  ];
}

/** Brings `schema` to the latest version; idempotent, and safe from several processes at once. */
export async function migrate(pool: Pool, schema: string): Promise<void> {
  const s = quoteSchema(schema);
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    // Transaction-scoped: released by the COMMIT or ROLLBACK, even if this process dies.
    await client.query("SELECT pg_advisory_xact_lock(hashtext('keel.workflow.schema'), hashtext($1))", [
      schema,
    ]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${s}.keel_schema (version integer NOT NULL)`);
    const found = await client.query<{ version: number }>(`SELECT version FROM ${s}.keel_schema`);
    const from = found.rows[0]?.version ?? 0;
    const all = migrations(s);
    for (const step of all.slice(from)) await client.query(step);
    if (found.rows.length === 0) await client.query(`INSERT INTO ${s}.keel_schema VALUES ($1)`, [all.length]);
    else if (from < all.length) await client.query(`UPDATE ${s}.keel_schema SET version = $1`, [all.length]);
    await client.query("COMMIT");
  } catch (e) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw e;
  } finally {
    client.release();
  }
}

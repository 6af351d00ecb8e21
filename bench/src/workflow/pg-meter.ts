/**
 * What a sample asks of PostgreSQL, counted in the client: every `query` of `pg` (DBOS and Keel's
 * store both use the one `pg` of the workspace) is one round trip to the server, however many
 * statements its text holds (a simple-protocol query with `;` holds several). A query outside
 * `BEGIN` ... `COMMIT` is a transaction of its own; a `COMMIT` ends one of several statements.
 *
 * And what a sample leaves on disk: the size of every relation of the sample's database outside
 * PostgreSQL's own schemas (tables, indexes, TOAST), before and after the timed part. A database of
 * its own per sample, so no other engineer's rows are in it.
 * @module
 */
import pg from "pg";

export interface PgCounts {
  /** `query` calls: round trips. */
  queries: number;
  /** SQL statements in them (a multi-statement text counts each). */
  statements: number;
  /** Transactions committed: autocommitted queries plus `COMMIT`s. */
  commits: number;
  /** Round trips by statement, its text cut to its first words: what the round trips are. */
  byText: Record<string, number>;
}

const inTransaction = new WeakSet<object>();
let counts: PgCounts = { queries: 0, statements: 0, commits: 0, byText: {} };

/** A statement's text as a short label: whitespace folded, cut after `chars` characters. */
function label(text: string, chars = 90): string {
  const folded = text.replace(/\s+/g, " ").trim();
  return folded.length > chars ? `${folded.slice(0, chars)}…` : folded;
}

/** Wraps `pg.Client.prototype.query` once, for this process. */
export function meterPg(): void {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const query = proto.query;
  proto.query = function metered(this: object, ...args: unknown[]) {
    const first = args[0];
    const text =
      typeof first === "string"
        ? first
        : typeof (first as { text?: unknown } | null)?.text === "string"
          ? (first as { text: string }).text
          : "";
    const statements = text
      .split(";")
      .map((s) => s.trim())
      .filter((s) => s.length > 0);
    counts.queries++;
    counts.statements += Math.max(1, statements.length);
    const key = label(text);
    counts.byText[key] = (counts.byText[key] ?? 0) + 1;
    for (const s of statements) {
      const head = s.slice(0, 12).toUpperCase();
      if (head.startsWith("BEGIN") || head.startsWith("START TRANS")) inTransaction.add(this);
      else if (head.startsWith("COMMIT") || head.startsWith("ROLLBACK")) {
        inTransaction.delete(this);
        counts.commits++;
      } else if (!inTransaction.has(this)) counts.commits++;
    }
    return query.apply(this, args);
  };
}

/** The counts so far, and a fresh start. */
export function takePgCounts(): PgCounts {
  const taken = counts;
  counts = { queries: 0, statements: 0, commits: 0, byText: {} };
  return taken;
}

/**
 * The server's WAL position in bytes: its growth over the timed part is what the sample wrote to
 * the WAL (row images, index entries, commit records), plus whatever anyone else wrote to the
 * server meanwhile (it is server-wide: the run prints the other sessions it saw).
 */
export async function walBytes(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ at: string }>(
      "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint AS at",
    );
    return Number(rows[0]!.at);
  } finally {
    await client.end();
  }
}

/** Bytes of every relation outside PostgreSQL's own schemas in the database of `url`. */
export async function relationBytes(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ bytes: string | null }>(
      `SELECT sum(pg_total_relation_size(c.oid))::bigint AS bytes FROM pg_class c
       JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE c.relkind IN ('r', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
         AND n.nspname NOT LIKE 'pg_toast%'`,
    );
    return Number(rows[0]?.bytes ?? 0);
  } finally {
    await client.end();
  }
}

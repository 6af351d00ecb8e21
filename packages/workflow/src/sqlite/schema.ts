/**
 * The SQLite store's schema and its migrations, in one place; the file's `user_version` is how many
 * have run. `migrate` runs the missing ones in one `BEGIN IMMEDIATE` transaction: the write lock is
 * taken before the version is read, so processes opening one file at once migrate it once.
 *
 * The columns are the PostgreSQL store's (see `postgres/schema.ts` for why each is there), in
 * SQLite's types: instants are INTEGER milliseconds, JSON values TEXT, `waiting_for` a JSON array.
 * No `signal_last`: SQLite runs one write at a time, so `park` reads the signals table itself.
 * @module
 */
import type BetterSqlite3 from "better-sqlite3";

const MIGRATIONS: readonly string[] = [
  `CREATE TABLE executions (
    id TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    version INTEGER NOT NULL,
    input TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    deadline_at INTEGER,
    wake_at INTEGER,
    waiting_for TEXT NOT NULL DEFAULT '[]',
    waiting_on TEXT,
    owner TEXT,
    lease_until INTEGER,
    generation INTEGER NOT NULL DEFAULT 0,
    cancel_requested TEXT,
    output TEXT,
    error TEXT,
    ended_at INTEGER,
    due_at INTEGER,
    signal_seq INTEGER NOT NULL DEFAULT 0
  );
  CREATE INDEX executions_due ON executions (due_at) WHERE due_at IS NOT NULL;
  CREATE INDEX executions_created ON executions (created_at DESC, id DESC);
  CREATE TABLE journal (
    execution_id TEXT NOT NULL,
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    ok INTEGER NOT NULL,
    value TEXT NOT NULL,
    error TEXT,
    attempts INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER NOT NULL,
    PRIMARY KEY (execution_id, key)
  );
  CREATE TABLE signals (
    execution_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    name TEXT NOT NULL,
    payload TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (execution_id, seq)
  ) WITHOUT ROWID;`,
];

/** Brings the file to the latest version; idempotent, and safe from several processes at once. */
export function migrate(db: BetterSqlite3.Database): void {
  db.transaction(() => {
    const from = db.pragma("user_version", { simple: true }) as number;
    for (const step of MIGRATIONS.slice(from)) db.exec(step);
    if (from < MIGRATIONS.length) db.pragma(`user_version = ${MIGRATIONS.length}`);
  }).immediate();
}

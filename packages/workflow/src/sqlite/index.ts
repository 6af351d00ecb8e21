/**
 * `@keel/workflow/sqlite`: the SQLite store, the embedded durable default, through
 * `better-sqlite3` 12 (an optional peer).
 * @module @keel/workflow/sqlite
 */
export { createSqliteStore, type SqliteStoreOptions } from "./sqlite-store.js";

/**
 * `@keel/workflow/postgres`: the PostgreSQL store, through `pg` (an optional peer).
 * @module @keel/workflow/postgres
 */
export { createPostgresStore, type PgPoolLike, type PostgresStoreOptions } from "./postgres-store.js";

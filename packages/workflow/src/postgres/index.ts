/**
 * `@keel/workflow/postgres`: the PostgreSQL store, through `pg` (an optional peer).
 * @module @keel/workflow/postgres
 */
export { isMissingPackageError, MissingPackageError } from "../store/missing-package.js";
export { createPostgresStore, type PostgresStoreOptions } from "./postgres-store.js";

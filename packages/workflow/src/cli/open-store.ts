/**
 * Opens the store `keel-workflows` reads, without creating one where none is: a SQLite path that
 * does not exist, or a PostgreSQL schema that does not, is an error (a typo must not leave an empty
 * database behind). An existing store is `init()`ed as an engine would (its tables brought up to
 * date), then only read.
 * @module
 */
import { existsSync } from "node:fs";
import type { Pool } from "pg";
import { loadPeer } from "../store/missing-package.js";
import type { WorkflowStore } from "../store/store.js";
import type { StoreArg } from "./args.js";

/** The store could not be opened: the message names the argument and why; the exit code is 1. */
export class StoreOpenError extends Error {
  override readonly name = "StoreOpenError";
}

/** An open store, and how to close what was opened for it. */
export interface OpenStore {
  readonly store: WorkflowStore;
  close(): Promise<void>;
}

export async function openStore(arg: StoreArg): Promise<OpenStore> {
  if (arg.kind === "sqlite") {
    if (!existsSync(arg.path)) throw new StoreOpenError(`--sqlite ${arg.path}: no such file`);
    const { createSqliteStore } = await import("../sqlite/index.js");
    const store = createSqliteStore({ path: arg.path });
    await store.init();
    return { store, close: () => store.close() };
  }
  const pg = loadPeer<typeof import("pg")>(
    "pg",
    "keel-workflows --postgres",
    "the PostgreSQL store needs it",
  );
  const pool: Pool = new pg.Pool({ connectionString: arg.url, max: 1 });
  pool.on("error", () => undefined);
  try {
    const found = await pool.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [arg.schema]);
    if (found.rowCount === 0)
      throw new StoreOpenError(
        `--schema ${arg.schema}: no such schema in ${redacted(arg.url)} (an engine's init() creates it)`,
      );
    const { createPostgresStore } = await import("../postgres/index.js");
    const store = createPostgresStore({ pool, schema: arg.schema });
    await store.init();
    return { store, close: () => pool.end() };
  } catch (e) {
    await pool.end().catch(() => undefined);
    throw e;
  }
}

/** A connection string for messages: its password left out. */
function redacted(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== "") u.password = "***";
    return u.toString();
  } catch {
    return "the database given";
  }
}

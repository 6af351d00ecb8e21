/**
 * Whether the PostgreSQL at 127.0.0.1:5432 answers, for the PostgreSQL test files, and a schema of
 * the file's own (a random name) on it. Without PostgreSQL the files are skipped with one line
 * saying how to start it; with `KEEL_REQUIRE_POSTGRES=1` (as `.ci/run` sets it) a missing
 * PostgreSQL fails instead.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";

const START_POSTGRES =
  "start PostgreSQL with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start";

/** The test database: trust authentication, user `PGUSER` or `postgres`, database `test`. */
export const POSTGRES_URL =
  process.env.KEEL_TEST_POSTGRES_URL ?? `postgres://${process.env.PGUSER ?? "postgres"}@127.0.0.1:5432/test`;

export const postgresUp = await (async () => {
  const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 5_000 });
  client.on("error", () => undefined);
  try {
    await client.connect();
    await client.query("SELECT 1");
    return true;
  } catch (e) {
    if (process.env.KEEL_REQUIRE_POSTGRES === "1")
      throw new Error(
        `KEEL_REQUIRE_POSTGRES=1 and no PostgreSQL at ${POSTGRES_URL} (${(e as Error).message}): ${START_POSTGRES}`,
      );
    console.log(`PostgreSQL tests skipped: no PostgreSQL at ${POSTGRES_URL}; ${START_POSTGRES}`);
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
})();

/** A schema name no other test file uses: `keel_test_<random>`. */
export function randomSchema(): string {
  return `keel_test_${randomBytes(6).toString("hex")}`;
}

/** Drops `schema` and everything in it. */
export async function dropSchema(pool: pg.Pool, schema: string): Promise<void> {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}

/**
 * The PostgreSQL store against the store contract, on a schema of this file's own (dropped at the
 * end; each test starts from empty tables), and what only PostgreSQL has: `init` from several
 * processes at once, the round trips each operation costs, a pool of the caller's own.
 */
import { createPostgresStore } from "@keel/workflow/postgres";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { entry, exec } from "./contract/support.js";
import { dropSchema, POSTGRES_URL, postgresUp, randomSchema } from "./postgres.js";
import { describeStoreContract } from "./store-contract.js";

const schema = randomSchema();
let pool: pg.Pool;

describe.skipIf(!postgresUp)("the PostgreSQL store", () => {
  beforeAll(() => {
    pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 12 });
  });
  afterAll(async () => {
    await dropSchema(pool, schema);
    await dropSchema(pool, `${schema}_init`);
    await pool.end();
  });

  describeStoreContract("postgres", async () => {
    const store = createPostgresStore({ pool, schema });
    await store.init();
    return {
      store,
      async cleanup() {
        await pool.query(`TRUNCATE "${schema}".executions, "${schema}".journal, "${schema}".signals`);
        await store.close();
      },
    };
  });

  it("init from several processes at once makes the schema once", async () => {
    const pools = Array.from({ length: 4 }, () => new pg.Pool({ connectionString: POSTGRES_URL, max: 1 }));
    try {
      const stores = pools.map((p) => createPostgresStore({ pool: p, schema: `${schema}_init` }));
      await Promise.all(stores.map((s) => s.init()));
      await Promise.all(stores.map((s) => s.init()));
      const tables = await pool.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name",
        [`${schema}_init`],
      );
      expect(tables.rows.map((r) => r.table_name)).toEqual([
        "executions",
        "journal",
        "keel_schema",
        "signals",
      ]);
      const version = await pool.query(`SELECT version FROM "${schema}_init".keel_schema`);
      expect(version.rows).toEqual([{ version: 1 }]);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  it("append is one statement whatever its entries; a claim is one, then journals and signals in one each", async () => {
    const store = createPostgresStore({ pool, schema });
    await store.init();
    const sent: string[] = [];
    const query = pool.query.bind(pool);
    pool.query = ((config: { text: string }, ...rest: unknown[]) => {
      sent.push(config.text.trim().split(/\s+/)[0]!);
      return (query as (...a: unknown[]) => unknown)(config, ...rest);
    }) as typeof pool.query;
    try {
      for (const id of ["a", "b", "c"]) await store.create(exec(id, 0));
      sent.length = 0;
      const claimed = await store.claim("worker-a", 10, 1_000, 10);
      expect(claimed).toHaveLength(3);
      expect(sent).toEqual(["WITH", "SELECT", "SELECT"]);
      const lease = { owner: "worker-a", generation: 1 };
      sent.length = 0;
      await store.append("a", lease, [entry("step:one#1")]);
      expect(sent).toEqual(["INSERT"]);
      sent.length = 0;
      await store.append(
        "a",
        lease,
        Array.from({ length: 50 }, (_, i) => entry(`step:many#${i + 1}`)),
      );
      expect(sent).toEqual(["INSERT"]);
      expect(await store.journal("a")).toHaveLength(51);
      sent.length = 0;
      expect(await store.claim("worker-b", 10, 1_000, 10)).toEqual([]);
      expect(sent).toEqual(["WITH"]);
    } finally {
      pool.query = query;
      await pool.query(`TRUNCATE "${schema}".executions, "${schema}".journal, "${schema}".signals`);
    }
  });

  it("leaves a pool it was given open at close, and describes where it is", async () => {
    const store = createPostgresStore({ pool, schema });
    expect(store.description).toBe(`postgres 127.0.0.1:5432/test (schema ${schema})`);
    await store.close();
    expect((await pool.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
  });

  it("refuses a schema name that is not a plain identifier", () => {
    expect(() => createPostgresStore({ pool, schema: 'x"; DROP TABLE y; --' })).toThrow(
      /createPostgresStore\(\{ schema \}\): expected a plain identifier/,
    );
  });
});

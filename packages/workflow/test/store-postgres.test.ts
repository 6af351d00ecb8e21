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
      expect(sent, "new executions: no journal nor signals to read").toEqual(["WITH"]);
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
      await store.signal("b", "go", null, 20);
      for (const id of ["a", "b"]) await store.release(id, lease, 20);
      sent.length = 0;
      const again = await store.claim("worker-b", 20, 1_000, 10);
      expect(again.map((c) => [c.record.id, c.journal.length, c.signals.length]).sort()).toEqual([
        ["a", 51, 0],
        ["b", 0, 1],
      ]);
      expect(sent, "replayed or signalled: one query for all journals, one for all signals").toEqual([
        "WITH",
        "SELECT",
        "SELECT",
      ]);
    } finally {
      pool.query = query;
      await pool.query(`TRUNCATE "${schema}".executions, "${schema}".journal, "${schema}".signals`);
    }
  });

  describe("group commit: appends that arrive while one is in flight go out as one statement", () => {
    /** A store whose statements are counted by their first word, and three claimed executions. */
    async function setUp(ids: readonly string[]) {
      const store = createPostgresStore({ pool, schema });
      await store.init();
      for (const id of ids) await store.create(exec(id, 0));
      const claimed = await store.claim("worker-a", 10, 1_000, 10);
      expect(claimed).toHaveLength(ids.length);
      const sent: string[] = [];
      const query = pool.query.bind(pool);
      pool.query = ((config: { text: string }, ...rest: unknown[]) => {
        sent.push(config.text.trim().split(/\s+/)[0]!);
        return (query as (...a: unknown[]) => unknown)(config, ...rest);
      }) as typeof pool.query;
      const restore = async () => {
        pool.query = query;
        await pool.query(`TRUNCATE "${schema}".executions, "${schema}".journal, "${schema}".signals`);
      };
      return { store, sent, restore, lease: { owner: "worker-a", generation: 1 } };
    }

    it("concurrent appends of several executions go in one statement, each journal whole and in order", async () => {
      const ids = ["a", "b", "c", "d"];
      const { store, sent, restore, lease } = await setUp(ids);
      try {
        await Promise.all([
          ...ids.map((id) => store.append(id, lease, [entry(`step:one#1`, { value: id })])),
          ...ids.map((id) =>
            store.append(id, lease, [entry("step:two#1", { value: id }), entry("step:three#1")]),
          ),
        ]);
        expect(sent).toEqual(["WITH"]);
        for (const id of ids)
          expect((await store.journal(id)).map((e) => [e.key, e.value])).toEqual([
            ["step:one#1", id],
            ["step:two#1", id],
            ["step:three#1", "step:three#1"],
          ]);
      } finally {
        await restore();
      }
    });

    it("one lost claim in a batch: that append is LeaseLostError, the others land", async () => {
      const { store, sent, restore, lease } = await setUp(["a", "b", "c"]);
      try {
        const stale = { owner: "worker-a", generation: 0 };
        await store.append("a", lease, [entry("step:first#1")]);
        sent.length = 0;
        const results = await Promise.allSettled([
          store.append("a", lease, [entry("step:zero#1")]),
          store.append("a", lease, [entry("step:one#1")]),
          store.append("b", stale, [entry("step:one#1")]),
          store.append("c", lease, [entry("step:one#1")]),
        ]);
        expect(sent).toEqual(["WITH"]);
        expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled"]);
        expect((results[2] as PromiseRejectedResult).reason).toMatchObject({
          code: "KEEL_LEASE_LOST",
          executionId: "b",
          generation: 0,
        });
        expect((await store.journal("a")).map((e) => e.key)).toEqual([
          "step:first#1",
          "step:zero#1",
          "step:one#1",
        ]);
        expect(await store.journal("b")).toEqual([]);
        expect((await store.journal("c")).map((e) => e.key)).toEqual(["step:one#1"]);
      } finally {
        await restore();
      }
    });

    it("a duplicate key in a batch fails only its append, with DuplicateEntryError naming it", async () => {
      const { store, sent, restore, lease } = await setUp(["a", "b", "c"]);
      try {
        await store.append("b", lease, [entry("step:one#1")]);
        sent.length = 0;
        const results = await Promise.allSettled([
          store.append("a", lease, [entry("step:zero#1")]),
          store.append("a", lease, [entry("step:one#1")]),
          store.append("b", lease, [entry("step:two#1"), entry("step:one#1")]),
          store.append("c", lease, [entry("step:one#1")]),
        ]);
        expect(sent, "the batch, then its appends one by one").toEqual([
          "WITH",
          "INSERT",
          "INSERT",
          "INSERT",
          "INSERT",
        ]);
        expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled"]);
        expect((results[2] as PromiseRejectedResult).reason).toMatchObject({
          code: "KEEL_DUPLICATE_ENTRY",
          executionId: "b",
          key: "step:one#1",
        });
        expect((await store.journal("a")).map((e) => e.key)).toEqual(["step:zero#1", "step:one#1"]);
        expect((await store.journal("b")).map((e) => e.key)).toEqual(["step:one#1"]);
        expect((await store.journal("c")).map((e) => e.key)).toEqual(["step:one#1"]);
      } finally {
        await restore();
      }
    });
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

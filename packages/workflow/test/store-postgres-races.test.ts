/**
 * The PostgreSQL store's writes racing each other, made deterministic: one side runs inside a
 * transaction left open (a store on one client, `BEGIN` sent first), the other is started, seen
 * waiting for the row's lock in `pg_stat_activity`, and then the transaction commits.
 * - An append racing a takeover waits for it and fails: an entry is never written under a claim
 *   that the new owner's journal read missed; in a batch of several executions' appends, only its
 *   own append fails.
 * - A park racing a signal for a name it waits for leaves the execution pending: no signal is slept
 *   through.
 */
import { createPostgresStore } from "@keel/workflow/postgres";
import pg from "pg";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createClaimed, entry, rejection } from "./contract/support.js";
import { dropSchema, POSTGRES_URL, postgresUp, randomSchema } from "./postgres.js";

const schema = randomSchema();
let pool: pg.Pool;
let open: pg.PoolClient | null = null;

/** Resolves once a statement of `pool` waits for a lock (the racing write is blocked). */
async function someoneWaitsForALock(): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const found = await pool.query(
      "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1",
      [`%"${schema}"%`],
    );
    if (found.rowCount! > 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error("the racing write never waited for the row's lock");
}

describe.skipIf(!postgresUp)("the PostgreSQL store's races", () => {
  beforeAll(async () => {
    pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 4 });
    await createPostgresStore({ pool, schema }).init();
  });
  beforeEach(async () => {
    open = await pool.connect();
    await open.query("BEGIN");
  });
  afterEach(async () => {
    await open?.query("ROLLBACK").catch(() => undefined);
    open?.release();
    open = null;
    await pool.query(`TRUNCATE "${schema}".executions, "${schema}".journal, "${schema}".signals`);
  });
  afterAll(async () => {
    await dropSchema(pool, schema);
    await pool.end();
  });

  it("an append racing a takeover waits for it and fails with LeaseLostError, writing nothing", async () => {
    const store = createPostgresStore({ pool, schema });
    const inTransaction = createPostgresStore({ pool: open as unknown as pg.Pool, schema });
    const old = await createClaimed(store, "a", "worker-a", 0, 1_000);
    const [taken] = await inTransaction.claim("worker-b", 1_000, 1_000, 1);
    expect(taken?.record.generation).toBe(old.generation + 1);
    const append = rejection(store.append("a", old, [entry("step:late#1")]));
    await someoneWaitsForALock();
    await open!.query("COMMIT");
    expect(await append).toMatchObject({ code: "KEEL_LEASE_LOST" });
    expect(await store.journal("a")).toEqual([]);
  });

  it("a batch of appends racing a takeover of one of its executions waits for it; only that append fails", async () => {
    const store = createPostgresStore({ pool, schema });
    const inTransaction = createPostgresStore({ pool: open as unknown as pg.Pool, schema });
    const old = await createClaimed(store, "a", "worker-a", 0, 1_000);
    const other = await createClaimed(store, "b", "worker-a", 0, 60_000);
    const [taken] = await inTransaction.claim("worker-b", 1_000, 1_000, 1);
    expect(taken?.record.id).toBe("a");
    const appends = Promise.allSettled([
      store.append("a", old, [entry("step:late#1")]),
      store.append("b", other, [entry("step:fine#1")]),
    ]);
    await someoneWaitsForALock();
    await open!.query("COMMIT");
    const [a, b] = await appends;
    expect(a).toMatchObject({ status: "rejected", reason: { code: "KEEL_LEASE_LOST" } });
    expect(b.status).toBe("fulfilled");
    expect(await store.journal("a")).toEqual([]);
    expect((await store.journal("b")).map((e) => e.key)).toEqual(["step:fine#1"]);
  });

  it("a park racing a signal it waits for leaves the execution pending", async () => {
    const store = createPostgresStore({ pool, schema });
    const inTransaction = createPostgresStore({ pool: open as unknown as pg.Pool, schema });
    const lease = await createClaimed(store, "a", "worker-a", 0, 1_000);
    expect(await inTransaction.signal("a", "approved", { by: "ann" }, 50)).toBe(1);
    const park = store.park("a", lease, {
      status: "waiting",
      wakeAt: null,
      waitingFor: ["approved"],
      waitingOn: 'event "approved"',
      signalsSeen: 0,
      nowMs: 60,
    });
    await someoneWaitsForALock();
    await open!.query("COMMIT");
    await park;
    expect(await store.get("a")).toMatchObject({ status: "pending", owner: null });
    const [woken] = await store.claim("worker-b", 60, 1_000, 1);
    expect(woken?.signals).toEqual([{ seq: 1, name: "approved", payload: { by: "ann" }, at: 50 }]);
  });
});

/**
 * PostgreSQL faults between an engine and its database (issue 25, "no hidden hang"), through a TCP
 * proxy on loopback in front of the shared server (which is never paused or stopped itself): a
 * database that stops answering while a step's outcome is written, and every connection reset.
 * Real clock, bounded by the engine's storeTimeoutMs and leaseMs.
 */
import { type KeelEvent, run, sleep } from "@keel/core";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { startProxy } from "../../worker/test/fixtures/tcp-proxy.js";
import { startWorkflowEngine, step, workflow } from "../src/index.js";
import { createPostgresStore } from "../src/postgres/index.js";
import { dropSchema, POSTGRES_URL, postgresUp, randomSchema } from "./postgres.js";

const schemas: string[] = [];
const admin = new pg.Pool({ connectionString: POSTGRES_URL, max: 1 });
afterAll(async () => {
  if (postgresUp) for (const s of schemas) await dropSchema(admin, s);
  await admin.end();
});

function viaProxy(port: number): string {
  const url = new URL(POSTGRES_URL);
  url.host = `127.0.0.1:${port}`;
  return url.toString();
}

describe.skipIf(!postgresUp)("W12: PostgreSQL faults, through a proxy", () => {
  it("the database stops answering as a step's outcome is written: the execution stops here (lost), then completes", async () => {
    const target = new URL(POSTGRES_URL);
    const proxy = await startProxy({ host: "127.0.0.1", port: Number(target.port || 5432) });
    const schema = randomSchema();
    schemas.push(schema);
    const store = createPostgresStore({ connectionString: viaProxy(proxy.port), schema });
    let runs = 0;
    const events: string[] = [];
    const w = workflow("stalled-db", function* () {
      const a = yield* step("write", function* () {
        runs++;
        if (runs === 1) proxy.stall(); // the database stops answering as this outcome is written
        return "written";
      });
      return yield* step("after", function* () {
        return `${a}, then after`;
      });
    });
    try {
      const result = await run(
        function* () {
          const engine = yield* startWorkflowEngine({
            store,
            workflows: [w],
            storeTimeoutMs: 500,
            leaseMs: 1_500,
            pollMs: 100,
          });
          yield* engine.start(w, null, { id: "s" });
          while (!events.includes("lost")) yield* sleep(20);
          proxy.resume();
          return yield* engine.result("s");
        },
        { onEvent: (e: KeelEvent) => void (e.type === "workflow:execution" && events.push(e.transition)) },
      );
      expect(result).toBe("written, then after");
      // The held write may have landed once the proxy let it through (then the step is replayed),
      // or not (then it runs again): at most twice, never a third time.
      expect(runs).toBeGreaterThanOrEqual(1);
      expect(runs).toBeLessThanOrEqual(2);
      expect(events.slice(0, 2)).toEqual(["run", "lost"]);
      expect(events.at(-1)).toBe("complete");
    } finally {
      proxy.resume();
      await store.close();
      await proxy.close();
    }
  }, 30_000);

  it("every connection reset and refused for a while: one store-down warning, one up, and the executions complete", async () => {
    const target = new URL(POSTGRES_URL);
    const proxy = await startProxy({ host: "127.0.0.1", port: Number(target.port || 5432) });
    const schema = randomSchema();
    schemas.push(schema);
    const store = createPostgresStore({ connectionString: viaProxy(proxy.port), schema });
    const states: string[] = [];
    const w = workflow("reset-db", function* (n: number) {
      let total = 0;
      for (let i = 0; i < 3; i++)
        total += yield* step(`s${i}`, function* () {
          yield* sleep(30);
          return n;
        });
      return total;
    });
    try {
      const results = await run(
        function* () {
          const engine = yield* startWorkflowEngine({
            store,
            workflows: [w],
            storeTimeoutMs: 1_000,
            leaseMs: 2_000,
            pollMs: 100,
          });
          for (let n = 0; n < 6; n++) yield* engine.start(w, n, { id: `r${n}` });
          yield* sleep(50);
          proxy.refuse(true);
          proxy.reset();
          yield* sleep(600);
          proxy.refuse(false);
          const out: number[] = [];
          for (let n = 0; n < 6; n++) out.push(yield* engine.result<number>(`r${n}`));
          return out;
        },
        { onEvent: (e: KeelEvent) => void (e.type === "workflow:store" && states.push(e.state)) },
      );
      expect(results).toEqual([0, 3, 6, 9, 12, 15]);
      expect(states.slice(0, 2)).toEqual(["down", "up"]);
    } finally {
      proxy.refuse(false);
      await store.close();
      await proxy.close();
    }
  }, 30_000);
});

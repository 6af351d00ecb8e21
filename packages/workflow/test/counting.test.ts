/**
 * The counting test (issue 25): 1,000 executions of a 5-step workflow across 2 worker processes on
 * PostgreSQL, with SIGKILLs injected; every step's side effect counted in PostgreSQL by its
 * idempotency key. 0 lost, and re-runs only of steps in flight in a process when it was killed.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { run } from "@keel/core";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { type Child, startChildWith } from "../../core/test/support/child.js";
import { startWorkflowEngine, workflow } from "../src/index.js";
import { createPostgresStore } from "../src/postgres/index.js";
import { dropSchema, POSTGRES_URL, postgresUp, randomSchema } from "./postgres.js";

const N = 1_000;
const dir = mkdtempSync(join(tmpdir(), "keel-wf-count-"));
const schema = randomSchema();
const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 2 });
afterAll(async () => {
  if (postgresUp) await dropSchema(pool, schema);
  await pool.end();
  rmSync(dir, { recursive: true, force: true });
});

describe("W12: the counting test, on PostgreSQL", () => {
  it.skipIf(!postgresUp)(
    "1,000 executions x 5 steps, 2 processes, 4 SIGKILLs: 0 lost, re-runs only of steps in flight at a kill",
    async () => {
      const store = createPostgresStore({ connectionString: POSTGRES_URL, schema });
      // The definition the processes run (the fixture's `five`): only its name and version matter here.
      const five = workflow("five", function* (_n: number) {
        return 0;
      });
      await run(function* () {
        const client = yield* startWorkflowEngine({ store, workflows: [five], run: false });
        for (let n = 0; n < N; n++) yield* client.start(five, n, { id: `c${n}` });
      });
      await pool.query(`CREATE TABLE "${schema}".effects (key text PRIMARY KEY, runs int NOT NULL)`);
      const script = new URL("./fixtures/workflow-process.ts", import.meta.url);
      const env = {
        WF_STORE: "postgres",
        WF_URL: POSTGRES_URL,
        WF_SCHEMA: schema,
        WF_EFFECTS: POSTGRES_URL,
        WF_WORKFLOW: "five",
        WF_STEP_MS: "20",
        WF_LEASE_MS: "1500",
        WF_CONCURRENCY: "16",
      };
      let started = 0;
      const killed: string[] = [];
      const start = () => {
        const log = join(dir, `p${++started}.log`);
        return { log, child: startChildWith({ env: { ...env, WF_LOG: log } }, script) as Child };
      };
      const procs = [start(), start()];
      const completed = async () =>
        Number(
          (await pool.query(`SELECT count(*) FROM "${schema}".executions WHERE status = 'completed'`)).rows[0]
            .count,
        );
      const waitUntil = async (done: () => Promise<boolean>, ms = 120_000) => {
        const until = performance.now() + ms;
        while (!(await done())) {
          if (performance.now() > until) throw new Error(`timed out; completed: ${await completed()}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      };
      // Kill a process each time another ~150 executions have completed, and start a new one.
      for (let k = 0; k < 4; k++) {
        const target = 150 * (k + 1);
        await waitUntil(async () => (await completed()) >= target);
        const victim = procs[k % 2]!;
        victim.child.process.kill("SIGKILL");
        await victim.child.exited;
        killed.push(victim.log);
        procs[k % 2] = start();
      }
      await waitUntil(async () => (await completed()) === N);
      for (const p of procs) p.child.process.kill("SIGKILL");
      await Promise.all(procs.map((p) => p.child.exited));

      const statuses = (
        await pool.query(`SELECT status, count(*)::int AS n FROM "${schema}".executions GROUP BY status`)
      ).rows;
      expect(statuses).toEqual([{ status: "completed", n: N }]);
      const wrong = await pool.query(
        `SELECT id, output FROM "${schema}".executions WHERE output <> '[' || (5 * substr(id, 2)::int + 15)::text || ']'`,
      );
      expect(wrong.rows).toEqual([]);
      const effects = (await pool.query(`SELECT key, runs FROM "${schema}".effects`)).rows as {
        key: string;
        runs: number;
      }[];
      expect(effects).toHaveLength(5 * N); // 0 lost: every step's effect happened
      // What was in flight in a killed process: a step started there whose outcome it never journaled.
      const inFlight = new Set<string>();
      for (const log of killed) {
        const lines = readFileSync(log, "utf8")
          .split("\n")
          .filter(Boolean)
          .map((l) => l.split(" "));
        const journaled = new Set(lines.filter((l) => l[1] === "journaled").map((l) => l[2]));
        for (const l of lines) if (l[1] === "start" && !journaled.has(l[2])) inFlight.add(l[2]!);
      }
      const rerun = effects.filter((e) => e.runs > 1);
      for (const e of rerun) expect(inFlight.has(e.key), `${e.key} ran ${e.runs} times`).toBe(true);
      expect(rerun.every((e) => e.runs === 2)).toBe(true);
      console.log(
        `counting: ${N} executions, ${5 * N} steps, 4 kills; ${inFlight.size} steps in flight at a kill, ${rerun.length} of them ran again (their effect had landed)`,
      );
      await store.close();
    },
    240_000,
  );
});

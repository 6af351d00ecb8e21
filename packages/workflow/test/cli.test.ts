/**
 * `keel-workflows`: executions listed by status and one shown with its journal, read from a SQLite
 * file that an engine wrote (in real processes, through tsx, as the bin runs), and from PostgreSQL
 * (in this process). Usage errors and a missing store, in this process.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { constant, isCancelled, run, sleep } from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import { createPostgresStore } from "@keel/workflow/postgres";
import { createSqliteStore } from "@keel/workflow/sqlite";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHILD_TEST_TIMEOUT_MS, startChild } from "../../core/test/support/child.js";
import { keelWorkflows } from "../src/cli/run-command.js";
import {
  type ExecutionRecord,
  sleepFor,
  startWorkflowEngine,
  step,
  type WorkflowStore,
  waitForEvent,
  workflow,
} from "../src/index.js";
import { dropSchema, POSTGRES_URL, postgresUp, randomSchema } from "./postgres.js";

const cli = new URL("../src/cli/keel-workflows.ts", import.meta.url);
const DAY = 24 * 3600_000;
const T0 = Date.UTC(2026, 11, 6, 9, 0);

const checkout = workflow("checkout", function* (order: { fail: boolean }) {
  let declines = 0;
  const charge = yield* step(
    "charge",
    function* () {
      if (declines++ === 0) throw new Error("card network busy");
      return "ch_1";
    },
    { retry: { attempts: 3, backoff: constant(1000), retryOn: () => true } },
  );
  const shipment = yield* step("ship", function* () {
    if (order.fail) throw new Error("no carrier for this address");
    return "parcel-9";
  });
  return { charge, shipment };
});
const reminder = workflow("reminder", function* () {
  yield* sleepFor(DAY);
});
const approval = workflow("approval", function* () {
  return yield* waitForEvent<string>("approved", { timeoutMs: 2 * DAY });
});

/**
 * Fills `store` on a virtual clock from T0: two checkouts ended (completed, failed), a reminder
 * sleeping, an approval waiting, then one execution claimed by another "process" (running) and one
 * pending.
 */
async function fill(store: WorkflowStore): Promise<void> {
  await run(
    function* fillStore() {
      const engine = yield* startWorkflowEngine({
        store,
        workflows: [checkout, reminder, approval],
        owner: "host-a:1:0001",
      });
      yield* engine.start(checkout, { fail: false }, { id: "order-1" });
      yield* engine.start(checkout, { fail: true }, { id: "order-2" });
      yield* engine.start(reminder, null, { id: "remind-1" });
      yield* engine.start(approval, null, { id: "approve-1" });
      for (const id of ["order-1", "order-2"]) {
        try {
          yield* engine.result(id);
        } catch (e) {
          if (isCancelled(e)) throw e;
        }
      }
      const parked = (id: string) => engine.get(id);
      while ((yield* parked("remind-1"))?.status !== "sleeping") yield* sleep(10);
      while ((yield* parked("approve-1"))?.status !== "waiting") yield* sleep(10);
    },
    { clock: createVirtualClock({ start: T0 }) },
  );
  const now = T0 + 5_000;
  await store.create({
    id: "order-3",
    workflow: "checkout",
    version: 1,
    input: null,
    deadlineAt: null,
    nowMs: now,
  });
  expect((await store.claim("host-b:4242:1a2b", now, 30_000, 1)).map((c) => c.record.id)).toEqual([
    "order-3",
  ]);
  await store.create({
    id: "order-4",
    workflow: "checkout",
    version: 1,
    input: null,
    deadlineAt: null,
    nowMs: now,
  });
}

/** Runs the CLI in this process; its output and exit code. */
async function inProcess(...argv: string[]) {
  let stdout = "";
  let stderr = "";
  const code = await keelWorkflows(
    argv,
    (t) => {
      stdout += t;
    },
    (t) => {
      stderr += t;
    },
  );
  return { code, stdout, stderr };
}

/** The table's row for `id`, as its columns (split on two spaces or more). */
function rowOf(stdout: string, id: string): string[] | undefined {
  return stdout
    .split("\n")
    .map((l) => l.split(/ {2,}/))
    .find((cols) => cols[0] === id);
}

const dir = mkdtempSync(path.join(tmpdir(), "keel-workflows-cli-"));
const file = path.join(dir, "keel.db");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("keel-workflows on a SQLite file", () => {
  beforeAll(async () => {
    const store = createSqliteStore({ path: file });
    await store.init();
    await fill(store);
    await store.close();
  });

  it(
    "list prints a table of executions (id, workflow, status, what it waits on, updated, owner); --status and --json filter and print records",
    async () => {
      const table = startChild(cli, "list", "--sqlite", file);
      const filtered = startChild(cli, "list", "--sqlite", file, "--status", "running,sleeping", "--json");
      expect((await table.exited).code).toBe(0);
      const out = table.stdoutLines().join("\n");
      expect(out.split("\n")[0]!.split(/ {2,}/)).toEqual([
        "ID",
        "WORKFLOW",
        "STATUS",
        "WAITING ON",
        "UPDATED",
        "OWNER",
      ]);
      expect(rowOf(out, "order-1")).toEqual([
        "order-1",
        "checkout",
        "completed",
        "-",
        "2026-12-06T09:00:01Z",
        "-",
      ]);
      expect(rowOf(out, "order-2")?.slice(0, 4)).toEqual(["order-2", "checkout", "failed", "-"]);
      expect(rowOf(out, "remind-1")?.slice(0, 4)).toEqual([
        "remind-1",
        "reminder",
        "sleeping",
        "sleep until 2026-12-07T09:00:00.000Z",
      ]);
      expect(rowOf(out, "approve-1")?.slice(0, 4)).toEqual([
        "approve-1",
        "approval",
        "waiting",
        'event "approved" (timeout at 2026-12-08T09:00:00.000Z)',
      ]);
      expect(rowOf(out, "order-3")).toEqual([
        "order-3",
        "checkout",
        "running",
        "-",
        "2026-12-06T09:00:05Z",
        "host-b:4242:1a2b",
      ]);
      expect(rowOf(out, "order-4")?.slice(0, 3)).toEqual(["order-4", "checkout", "pending"]);
      // Newest first: the two made last, then the four the engine started at T0.
      expect(
        out
          .split("\n")
          .slice(1, 3)
          .map((l) => l.split(" ")[0]),
      ).toEqual(["order-4", "order-3"]);

      expect((await filtered.exited).code).toBe(0);
      const records = JSON.parse(filtered.stdoutLines().join("\n")) as ExecutionRecord[];
      expect(records.map((r) => [r.id, r.status, r.owner]).sort()).toEqual([
        ["order-3", "running", "host-b:4242:1a2b"],
        ["remind-1", "sleeping", null],
      ]);
      expect(table.stderr() + filtered.stderr()).toBe("");
    },
    CHILD_TEST_TIMEOUT_MS,
  );

  it(
    "show prints an execution's record and its journal: each step with its attempts, duration and outcome",
    async () => {
      const done = startChild(cli, "show", "order-1", "--sqlite", file);
      const failed = startChild(cli, "show", "order-2", "--sqlite", file);
      expect((await done.exited).code).toBe(0);
      const out = done.stdoutLines();
      expect(out[0]).toBe("execution order-1");
      expect(out).toContain("  workflow  checkout (version 1)");
      expect(out).toContain("  status    completed");
      expect(out).toContain('  output    {"charge":"ch_1","shipment":"parcel-9"}');
      const steps = out.slice(out.findIndex((l) => l.startsWith("STEP "))).map((l) => l.split(/ {2,}/));
      expect(steps).toEqual([
        ["STEP", "KIND", "ATTEMPTS", "DURATION", "ENDED", "OUTCOME"],
        ["charge#1", "step", "2", "1.0s", "2026-12-06T09:00:01Z", '"ch_1"'],
        ["ship#1", "step", "1", "0ms", "2026-12-06T09:00:01Z", '"parcel-9"'],
      ]);

      expect((await failed.exited).code).toBe(0);
      const text = failed.stdoutLines().join("\n");
      expect(text).toMatch(/^ {2}status {4}failed$/m);
      expect(text).toMatch(/^ {2}error {5}Error: no carrier for this address$/m);
      expect(text).toMatch(/^ship#1 +step +1 +0ms +\S+ +error: no carrier for this address$/m);
    },
    CHILD_TEST_TIMEOUT_MS,
  );

  it("show of a parked execution: what it waits on, when it wakes, its sleep in the journal; --json the record with its steps", async () => {
    const r = await inProcess("show", "remind-1", "--sqlite", file);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("  waiting on  sleep until 2026-12-07T09:00:00.000Z\n");
    expect(r.stdout).toContain("  wakes       2026-12-07T09:00:00Z\n");
    expect(r.stdout).toMatch(/^sleep:#1 +sleep +- +- +2026-12-06T09:00:00Z +wakes 2026-12-07T09:00:00Z$/m);
    const json = await inProcess("show", "order-1", "--sqlite", file, "--json");
    const shown = JSON.parse(json.stdout) as ExecutionRecord & { steps: { key: string; attempts: number }[] };
    expect(shown.status).toBe("completed");
    expect(shown.steps.map((s) => [s.key, s.attempts])).toEqual([
      ["charge#1", 2],
      ["ship#1", 1],
    ]);
  });

  it("list --workflow and --limit narrow the list; an empty result says so", async () => {
    const r = await inProcess("list", "--sqlite", file, "--workflow", "checkout", "--limit", "2");
    expect(
      r.stdout
        .trim()
        .split("\n")
        .slice(1)
        .map((l) => l.split(" ")[0]),
    ).toEqual(["order-4", "order-3"]);
    const none = await inProcess("list", "--sqlite", file, "--workflow", "nope");
    expect([none.code, none.stdout]).toEqual([0, "no executions\n"]);
  });

  it("an unknown execution, a missing file (not created) and bad usage: exit 1, 1 and 2, with why", async () => {
    const unknown = await inProcess("show", "order-99", "--sqlite", file);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no execution "order-99" in sqlite');
    const missing = path.join(dir, "typo.db");
    const noFile = await inProcess("list", "--sqlite", missing);
    expect([noFile.code, noFile.stderr]).toEqual([1, `keel-workflows: --sqlite ${missing}: no such file\n`]);
    expect(existsSync(missing)).toBe(false);
    for (const [argv, message] of [
      [["list"], "expected one store: --sqlite <path> or --postgres <url>"],
      [["list", "--sqlite", file, "--postgres", "postgres://x"], "expected one store"],
      [["list", "--sqlite", file, "--status", "asleep"], '--status: unknown status "asleep"'],
      [["list", "--sqlite", file, "--limit", "0"], "--limit: expected a whole number ≥ 1, got 0"],
      [["show", "--sqlite", file], "show: expected one execution id"],
      [["show", "x", "--sqlite", file, "--status", "running"], "--status: only for list"],
      [["purge", "--sqlite", file], 'unknown command "purge"'],
      [["list", "--sqlite", file, "--schema", "keel"], "--schema: only with --postgres"],
      [["list", "--sqlite"], "--sqlite: expected a value"],
    ] as const) {
      const r = await inProcess(...argv);
      expect([argv, r.code, r.stderr]).toEqual([argv, 2, expect.stringContaining(message)]);
    }
  });

  it(
    "--help gives the usage, and says that keel-inspect <pid> shows a process's live executions",
    async () => {
      const help = startChild(cli, "--help");
      expect((await help.exited).code).toBe(0);
      const text = help.stdoutLines().join("\n");
      expect(text).toContain("keel-workflows list (--sqlite <path> | --postgres <url> [--schema keel])");
      expect(text).toContain("keel-inspect <pid> prints that process's task trees");
    },
    CHILD_TEST_TIMEOUT_MS,
  );
});

describe.skipIf(!postgresUp)("keel-workflows on PostgreSQL", () => {
  const schema = randomSchema();
  let pool: pg.Pool;
  beforeAll(async () => {
    pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 2 });
    const store = createPostgresStore({ pool, schema });
    await store.init();
    await fill(store);
  });
  afterAll(async () => {
    await dropSchema(pool, schema);
    await pool.end();
  });

  it("list --postgres <url> --schema reads the same table; a schema that does not exist is an error, not created", async () => {
    const r = await inProcess("list", "--postgres", POSTGRES_URL, "--schema", schema, "--status", "waiting");
    expect(r.code).toBe(0);
    expect(
      r.stdout
        .trim()
        .split("\n")
        .slice(1)
        .map((l) => l.split(/ {2,}/).slice(0, 3)),
    ).toEqual([["approve-1", "approval", "waiting"]]);
    const typo = `${schema}_typo`;
    const missing = await inProcess("list", "--postgres", POSTGRES_URL, "--schema", typo);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`--schema ${typo}: no such schema`);
    const found = await pool.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [typo]);
    expect(found.rowCount).toBe(0);
  });
});

/**
 * `npm run demo:workflow`: a durable workflow survives `kill -9`, on the embedded SQLite store
 * (no server). A first process starts a checkout and is SIGKILLed in the middle of its `charge`
 * step; a second process, started on the same database file, resumes it: the steps journaled
 * before the kill are not run again, the one in flight is, and the result is the same.
 * `--db <path>` keeps the database somewhere of your choosing (default: a temporary directory).
 * @module
 */
import { spawn } from "node:child_process";
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type KeelEvent, run } from "@keel/core";
import { startWorkflowEngine } from "@keel/workflow";
import { createSqliteStore } from "@keel/workflow/sqlite";
import { checkoutWorkflow, type Order } from "./workflow/checkout.js";

const role = process.argv[2];
const dbFlag = process.argv.indexOf("--db");

if (role === "--process")
  await workerProcess(process.argv[3]!, process.argv[4]!, process.argv[5] === "start");
else await narrate();

/** One worker process: an engine on the SQLite file, the checkout started (first) or resumed. */
async function workerProcess(db: string, runLog: string, start: boolean): Promise<void> {
  const store = createSqliteStore({ path: db });
  const checkout = checkoutWorkflow((line) => appendFileSync(runLog, `${line}\n`), start ? 60_000 : 300);
  const onEvent = (e: KeelEvent) => {
    if (e.type === "workflow:step" && e.transition === "replay")
      console.log(
        `  [pid ${process.pid}] ${e.key.replace(/#\d+$/, "").padEnd(8)} replayed  (journaled before the kill: not run again)`,
      );
  };
  const result = await run(
    function* () {
      const engine = yield* startWorkflowEngine({
        store,
        workflows: [checkout],
        leaseMs: 1_500,
        pollMs: 100,
      });
      const order: Order = { id: "A-1001", cents: 4_200 };
      if (start) yield* engine.start(checkout, order, { id: "order-A-1001" });
      return yield* engine.result("order-A-1001");
    },
    { onEvent },
  );
  console.log(`  [pid ${process.pid}] result: ${JSON.stringify(result)}`);
  await store.close();
}

async function narrate(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "keel-workflow-demo-"));
  const db = dbFlag > 0 ? process.argv[dbFlag + 1]! : join(dir, "workflows.db");
  const runLog = join(dir, "runs.log");
  const self = fileURLToPath(import.meta.url);
  const child = (start: boolean) =>
    spawn(
      process.execPath,
      [...process.execArgv, self, "--process", db, runLog, start ? "start" : "resume"],
      {
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
  try {
    console.log(`A checkout workflow on the embedded SQLite store (${db}).\n`);
    console.log("1. The first process starts order A-1001:");
    const first = child(true);
    await new Promise<void>((resolve, reject) => {
      first.stdout!.setEncoding("utf8").on("data", (text: string) => {
        process.stdout.write(text);
        if (text.includes(" charge ")) resolve();
      });
      first.on("exit", () => reject(new Error("the first process ended before its charge step")));
    });
    first.kill("SIGKILL");
    await new Promise((r) => first.once("exit", r));
    console.log(`\n2. kill -9 ${first.pid}, in the middle of charge (it had a minute to go).\n`);
    console.log(
      "3. A second process opens the same file; once the dead one's lease (1.5 s) ends, it resumes:",
    );
    const second = child(false);
    second.stdout!.setEncoding("utf8").on("data", (text: string) => process.stdout.write(text));
    const code = await new Promise<number | null>((r) => second.once("exit", r));
    if (code !== 0) throw new Error(`the second process exited with ${code}`);
    const runs = readFileSync(runLog, "utf8")
      .trim()
      .split("\n")
      .map((l) => l.split(" "));
    const count = (name: string) => runs.filter(([, n]) => n === name).length;
    console.log("\n4. What ran, across both processes:");
    for (const name of ["reserve", "charge", "ship", "receipt"]) {
      const n = count(name);
      const note =
        n === 1
          ? "once"
          : `${n} times (it was in flight at the kill; its idempotency key let the API see the repeat)`;
      console.log(`   ${name.padEnd(8)} ${note}`);
    }
  } finally {
    if (dbFlag < 0) rmSync(dir, { recursive: true, force: true });
  }
}

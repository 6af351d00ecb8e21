/**
 * One DBOS Transact sample of the workflow bench: `workload` (fanout | sequential) on the system
 * database at `url` (a database of the sample's own, made and dropped by the parent), and one JSON
 * line out (see `Sample` in `./workloads.ts`).
 *
 * The workflows are DBOS's own idiom: `DBOS.registerWorkflow` over an async function whose steps are
 * `DBOS.runStep` of an async no-op. A workflow is started with `DBOS.startWorkflow` under an id of the
 * bench's, and waited for with its handle's `getResult()` (the workflow's promise, in this process).
 * @module
 */
import { DBOS } from "@dbos-inc/dbos-sdk";
import { meterPg, relationBytes, walBytes } from "./pg-meter.js";
import { measure, parseChildArgs } from "./workloads.js";

const { workload, url, count, steps, concurrency, warmup } = parseChildArgs(process.argv.slice(2));
meterPg();

const noop = async (): Promise<void> => {};

const stepsOf = DBOS.registerWorkflow(
  async function stepsOf(n: number): Promise<number> {
    for (let k = 0; k < n; k++) await DBOS.runStep(noop, { name: "noop" });
    return n;
  },
  { name: "stepsOf" },
);

DBOS.setConfig({ name: "keel-bench", systemDatabaseUrl: url, logLevel: "error" });
await DBOS.launch();

let started = 0;
const runOne = async (prefix: string, n: number): Promise<void> => {
  const handle = await DBOS.startWorkflow(stepsOf, { workflowID: `${prefix}-${started++}` })(n);
  await handle.getResult();
};

const sample = await measure({
  workload,
  url,
  count,
  steps,
  concurrency,
  warmup,
  run: runOne,
  size: () => relationBytes(url),
  wal: () => walBytes(url),
});
await DBOS.shutdown();
console.log(JSON.stringify(sample));

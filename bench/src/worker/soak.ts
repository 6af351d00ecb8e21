/**
 * The worker soak: `jobs` jobs (default 100,000) with random faults from the fault server (slow
 * answers, 503 with Retry-After, resets, hangs, invalid orders), on BullMQ and on the embedded
 * queue, each in its own process (`soak-child.ts`), the fault server in this one (it records every
 * request, so its memory must not count). Checks that every job ends completed or dead-lettered
 * exactly once, counted from the engine's own records, and that the heap after GC stays flat (the
 * last tenth's sample within 10% of the first's). Prints a table for `bench/results.md`; exits 1 if
 * a check fails.
 *
 * Usage: `npm run bench:worker:soak -w @keel/bench [-- --jobs=100000 --engines=bullmq,memory]`.
 * @module
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { run, until } from "@keel/core";
import { createFaultServer } from "@keel/testing";
// The demo's flaky API: the same routes and weights the demo runs against.
import { routes } from "../../../examples/src/worker/flaky-api.js";

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1];
const jobs = Number(arg("jobs") ?? 100_000);
const engines = (arg("engines") ?? "bullmq,memory").split(",");
const child = fileURLToPath(new URL("./soak-child.ts", import.meta.url));

interface Result {
  engine: string;
  jobs: number;
  elapsedMs: number;
  stats: {
    completed: number;
    retried: number;
    deadLettered: { expired: number; exhausted: number; rejected: number };
  };
  records: {
    completed: number;
    deadLettered: number;
    missing: number;
    inBoth: number;
    unknown: number;
    leftOver: number;
  };
  heapMb: number[];
  rssMb: number;
}

function sample(engine: string, url: string): Promise<Result> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ["--expose-gc", "--import", "tsx", child, engine, String(jobs), url], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    p.stdout.on("data", (c: Buffer) => {
      out += c.toString();
    });
    p.on("error", reject);
    p.on("close", (code) =>
      code === 0
        ? resolve(JSON.parse(out.trim().split("\n").at(-1)!) as Result)
        : reject(new Error(`soak ${engine}: exit ${code}\n${out}`)),
    );
  });
}

const results = await run(function* soak() {
  const api = yield* createFaultServer(routes, { connectHang: false });
  const all: Result[] = [];
  for (const engine of engines) all.push(yield* until(sample(engine, api.url)));
  return all;
});

let failed = false;
console.log(
  `| engine | jobs | jobs/s | completed / dead-lettered (engine's records) | missing, twice, unknown, left over | Keel's counters: completed / retried / dead (exp, exh, rej) | heap after GC at each tenth (MB) | last / first | highest / first |`,
);
console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
for (const r of results) {
  const d = r.stats.deadLettered;
  const keelEnded = r.stats.completed + d.expired + d.exhausted + d.rejected;
  const once =
    r.records.completed + r.records.deadLettered === r.jobs &&
    r.records.missing === 0 &&
    r.records.inBoth === 0 &&
    r.records.unknown === 0 &&
    r.records.leftOver === 0 &&
    keelEnded === r.jobs;
  const growth = r.heapMb.at(-1)! / r.heapMb[0]!;
  const flat = growth <= 1.1;
  failed ||= !once || !flat;
  console.log(
    `| ${r.engine} | ${r.jobs.toLocaleString("en")} | ${Math.round((r.jobs * 1000) / r.elapsedMs).toLocaleString("en")} | ${r.records.completed.toLocaleString("en")} / ${r.records.deadLettered.toLocaleString("en")} ${once ? "(each once)" : "(NOT each once)"} | ${r.records.missing}, ${r.records.inBoth}, ${r.records.unknown}, ${r.records.leftOver} | ${r.stats.completed.toLocaleString("en")} / ${r.stats.retried.toLocaleString("en")} / ${d.expired + d.exhausted + d.rejected} (${d.expired}, ${d.exhausted}, ${d.rejected}) | ${r.heapMb.map((m) => m.toFixed(1)).join(", ")} | ${growth.toFixed(2)} ${flat ? "(flat)" : "(GROWS)"} | ${(Math.max(...r.heapMb) / r.heapMb[0]!).toFixed(2)} |`,
  );
}
console.log(`\nnode ${process.version}; ${failed ? "a check FAILED" : "every check passed"}`);
process.exitCode = failed ? 1 : 0;

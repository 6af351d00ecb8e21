/**
 * The parked-executions row of the workflow bench (issue 25): 100,000 executions parked on a
 * durable sleep, and the worker's heap after a full GC before and after (`./parked-child.ts` says
 * what each kind measures). Each sample is its own `node --expose-gc` process.
 *
 * Usage: `npm run bench:workflow:parked -w @keel/bench [-- --count=100000 --warmup=1000 --reps=3
 * --kinds=sqlite,memory,memory-store]`
 * @module
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const arg = (name: string, fallback: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? fallback);
const count = arg("count", 100_000);
const warmup = arg("warmup", 1000);
const reps = arg("reps", 3);
const kinds = process.argv
  .find((a) => a.startsWith("--kinds="))
  ?.split("=")[1]
  ?.split(",") ?? ["sqlite", "memory", "memory-store"];
const child = fileURLToPath(new URL("./parked-child.ts", import.meta.url));

interface Parked {
  kind: string;
  before: number;
  after: number;
  running?: number;
  rss: number;
}
const LABEL: Record<string, string> = {
  sqlite: "engine on the SQLite store (rows on disk): the engine's own retention",
  memory: "engine on the memory store (rows in the heap)",
  "memory-store": "the memory store's rows alone, no engine",
};
const samples = new Map<string, Parked[]>();
for (let r = 0; r < reps; r++)
  for (const kind of kinds) {
    const dir = mkdtempSync(join(tmpdir(), "keel-bench-parked-"));
    try {
      const out = spawnSync(
        process.execPath,
        ["--expose-gc", "--import", "tsx", child, kind, String(count), String(warmup), join(dir, "keel.db")],
        { encoding: "utf8" },
      );
      if (out.status !== 0) throw new Error(`${kind}: exit ${out.status}\n${out.stderr}`);
      const s = JSON.parse(out.stdout.trim().split("\n").at(-1)!) as Parked;
      samples.set(kind, [...(samples.get(kind) ?? []), s]);
      process.stderr.write(
        `${kind} ${r + 1}/${reps}: ${(s.before / 1e6).toFixed(1)} -> ${(s.after / 1e6).toFixed(1)} MB\n`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

const median = (xs: number[]) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mb = (b: number) => `${(b / 1e6).toFixed(1)} MB`;
const perExecution = (s: Parked) => (s.after - s.before) / count;
console.log(
  `| ${count.toLocaleString("en")} executions parked on a durable sleep | heap after GC, before | after | growth per parked execution | samples (bytes per execution) |`,
);
console.log("| --- | --- | --- | --- | --- |");
for (const kind of kinds) {
  const ss = samples.get(kind)!;
  console.log(
    `| ${LABEL[kind] ?? kind} | ${mb(median(ss.map((s) => s.before)))} | ${mb(median(ss.map((s) => s.after)))} | ${Math.round(median(ss.map(perExecution)))} B | ${ss.map((s) => Math.round(perExecution(s))).join(", ")} |`,
  );
}
const memory = samples.get("memory");
const store = samples.get("memory-store");
if (memory && store)
  console.log(
    `\nThe engine's own retention on the memory store (engine less the store's rows): ${Math.round(median(memory.map(perExecution)) - median(store.map(perExecution)))} B per parked execution.`,
  );
console.log(
  `\nMedians of ${reps} samples, each its own process (node ${process.version}, --expose-gc), after ${warmup.toLocaleString("en")} executions parked the same way untimed; the heap is heapUsed after two full GCs.`,
);

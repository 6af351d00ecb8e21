/**
 * The BullMQ worker benchmark: no-op jobs through Keel's `useWorker` on `useBullQueue`, beside a
 * plain BullMQ `Worker` with the same concurrency, on the same Redis (127.0.0.1:6379). Each sample
 * is its own process and the two take turns. Prints a table for `bench/results.md`.
 *
 * Usage: `npm run bench:worker:bullmq -w @keel/bench [-- --jobs=5000 --reps=3]`.
 * @module
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const arg = (name: string, fallback: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? fallback);
const jobs = arg("jobs", 5000);
const reps = arg("reps", 3);
const child = fileURLToPath(new URL("./bullmq-child.ts", import.meta.url));

const runs = new Map<string, number[]>();
for (const concurrency of [1, 16]) {
  for (let r = 0; r < reps; r++) {
    for (const kind of ["keel", "plain"]) {
      const out = spawnSync(
        process.execPath,
        ["--import", "tsx", child, kind, String(jobs), String(concurrency)],
        {
          encoding: "utf8",
        },
      );
      if (out.status !== 0) throw new Error(`${kind}: ${out.stderr}`);
      const key = `${kind === "keel" ? "Keel useWorker on useBullQueue" : "plain BullMQ Worker"}, ${concurrency}`;
      runs.set(key, [...(runs.get(key) ?? []), JSON.parse(out.stdout.trim().split("\n").at(-1)!).runMs]);
    }
  }
}

const median = (xs: number[]) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`| no-op jobs on Redis (${jobs.toLocaleString("en")}), concurrency | jobs/s |`);
console.log("| --- | --- |");
for (const [key, samples] of runs)
  console.log(`| ${key} | ${Math.round((jobs * 1000) / median(samples)).toLocaleString("en")} |`);
console.log(`\nmedians of ${reps} samples, each its own process; node ${process.version}`);

/**
 * The worker benchmark: no-op jobs through `useWorker` on the embedded queue (jobs/s, and the cost
 * per job of adding it and of running it), beside a hand-written loop over a channel with the same
 * concurrency (what users wrote before `@keel/worker`). Each sample is its own process; the two
 * take turns, so the machine's drift lands on both. Appends nothing: prints a table for
 * `bench/results.md`.
 *
 * Usage: `npm run bench:worker -w @keel/bench [-- --jobs=100000 --reps=3]`.
 * @module
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const arg = (name: string, fallback: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? fallback);
const jobs = arg("jobs", 100_000);
const reps = arg("reps", 3);
const child = fileURLToPath(new URL("./child.ts", import.meta.url));

interface Sample {
  addNsPerJob: number;
  runMs: number;
  heapAfterMb: number;
}

const kinds = ["worker", "channel"] as const;
const rows: Record<string, Sample[]> = {};
for (const concurrency of [1, 16, 128]) {
  for (let r = 0; r < reps; r++) {
    for (const kind of kinds) {
      const out = spawnSync(
        process.execPath,
        ["--expose-gc", "--import", "tsx", child, kind, String(jobs), String(concurrency)],
        {
          encoding: "utf8",
        },
      );
      if (out.status !== 0) throw new Error(`${kind}: ${out.stderr}`);
      const key = `${kind} ${concurrency}`;
      rows[key] ??= [];
      rows[key].push(JSON.parse(out.stdout.trim().split("\n").at(-1)!) as Sample);
    }
  }
}

const median = (xs: number[]) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(
  `| no-op jobs (${jobs.toLocaleString("en")}), concurrency | jobs/s | µs per job (run) | ns per add | heap after |`,
);
console.log("| --- | --- | --- | --- | --- |");
for (const [key, samples] of Object.entries(rows)) {
  const runMs = median(samples.map((s) => s.runMs));
  const [kind, c] = key.split(" ");
  const label = kind === "worker" ? `useWorker, embedded queue, ${c}` : `hand-written channel loop, ${c}`;
  console.log(
    `| ${label} | ${Math.round((jobs * 1000) / runMs).toLocaleString("en")} | ${((runMs * 1000) / jobs).toFixed(2)} | ${Math.round(median(samples.map((s) => s.addNsPerJob)))} | ${median(samples.map((s) => s.heapAfterMb)).toFixed(1)} MB |`,
  );
}
console.log(`\nmedians of ${reps} samples, each its own process; node ${process.version}`);

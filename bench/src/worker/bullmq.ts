/**
 * The BullMQ worker benchmark: no-op jobs through Keel's `useWorker` on `useBullQueue`, beside a
 * plain BullMQ `Worker` with the same concurrency, on the same Redis (127.0.0.1:6379). Each sample
 * is its own process and the two take turns. Prints a table for `bench/results.md`.
 *
 * Each sample first runs `--warmup` jobs (default: as many as it times) in the same worker, untimed,
 * so that the figures are a running worker's, not the JIT's warm-up (`--warmup=0` for a cold run).
 *
 * Usage: `npm run bench:worker:bullmq -w @keel/bench [-- --jobs=5000 --warmup=5000 --reps=3]`.
 * @module
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const arg = (name: string, fallback: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? fallback);
const jobs = arg("jobs", 5000);
const reps = arg("reps", 3);
const warmup = arg("warmup", jobs);
const child = fileURLToPath(new URL("./bullmq-child.ts", import.meta.url));

interface Sample {
  runMs: number;
  cpuMs: number;
}
const runs = new Map<string, Sample[]>();
for (const concurrency of [1, 16]) {
  for (let r = 0; r < reps; r++) {
    for (const kind of ["keel", "plain"]) {
      const out = spawnSync(
        process.execPath,
        ["--expose-gc", "--import", "tsx", child, kind, String(jobs), String(concurrency), String(warmup)],
        {
          encoding: "utf8",
        },
      );
      if (out.status !== 0) throw new Error(`${kind}: ${out.stderr}`);
      const key = `${kind} ${concurrency}`;
      runs.set(key, [...(runs.get(key) ?? []), JSON.parse(out.stdout.trim().split("\n").at(-1)!) as Sample]);
    }
  }
}

const median = (xs: number[]) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const perSecond = (key: string) => (jobs * 1000) / median(runs.get(key)!.map((s) => s.runMs));
const cpuPerJobUs = (key: string) => (median(runs.get(key)!.map((s) => s.cpuMs)) * 1000) / jobs;
console.log(
  `| no-op jobs on Redis (${jobs.toLocaleString("en")}), concurrency | jobs/s | CPU per job (this process) | Keel / plain |`,
);
console.log("| --- | --- | --- | --- |");
for (const concurrency of [1, 16]) {
  const keel = perSecond(`keel ${concurrency}`);
  const plain = perSecond(`plain ${concurrency}`);
  console.log(
    `| Keel useWorker on useBullQueue, ${concurrency} | ${Math.round(keel).toLocaleString("en")} | ${Math.round(cpuPerJobUs(`keel ${concurrency}`))} µs | ${(keel / plain).toFixed(2)}x |`,
  );
  console.log(
    `| plain BullMQ Worker, ${concurrency} | ${Math.round(plain).toLocaleString("en")} | ${Math.round(cpuPerJobUs(`plain ${concurrency}`))} µs | |`,
  );
}
console.log(
  `\nmedians of ${reps} samples, each its own process after ${warmup.toLocaleString("en")} untimed jobs, the two interleaved; node ${process.version}`,
);

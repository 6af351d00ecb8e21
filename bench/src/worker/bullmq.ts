/**
 * The BullMQ worker benchmark: no-op jobs through Keel's `useWorker` on `useBullQueue`, beside a
 * plain BullMQ `Worker` with the same concurrency, on the same Redis (127.0.0.1:6379). Each sample
 * is its own process and the two take turns. Prints a table for `bench/results.md`.
 *
 * This process is the producer: before each sample it adds the jobs under a fresh prefix, the same
 * way for both sides, and removes the keys after. A worker process that also produced its own jobs
 * (as the Keel sample once did, one `add` at a time, where the plain one used `addBulk`) runs the
 * timed jobs through JIT code and a heap shaped by that other work.
 *
 * Two ratios: of the medians, and the median of each back-to-back pair's ratio ("paired"). This
 * host switches between fast and slow spells minutes long; the paired figure is the one they move
 * least, as a spell lands on both samples of a pair.
 *
 * Each sample first runs `--warmup` jobs (default: as many as it times) in the same worker, untimed,
 * so that the figures are a running worker's, not the JIT's warm-up (`--warmup=0` for a cold run).
 *
 * Usage: `npm run bench:worker:bullmq -w @keel/bench [-- --jobs=5000 --warmup=5000 --reps=7]`.
 * @module
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Queue } from "bullmq";

const arg = (name: string, fallback: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? fallback);
const jobs = arg("jobs", 5000);
const reps = arg("reps", 7);
const warmup = arg("warmup", jobs);
const child = fileURLToPath(new URL("./bullmq-child.ts", import.meta.url));

interface Sample {
  runMs: number;
  cpuMs: number;
}
const connection = { host: "127.0.0.1", port: 6379, maxRetriesPerRequest: null };

/**
 * Adds `count` no-op jobs under a fresh prefix, from this process: the worker under test only
 * consumes, so its JIT and heap see only the worker's work. The jobs are in `@keel/worker/bullmq`'s
 * stored form (`{ payload }`, name `job`), which the plain worker ignores.
 */
async function produce(prefix: string, count: number): Promise<Queue> {
  const queue = new Queue("bench", { connection, prefix });
  for (let i = 0; i < count; i += 1000)
    await queue.addBulk(
      Array.from({ length: Math.min(1000, count - i) }, (_, k) => ({
        name: "job",
        data: { payload: i + k },
      })),
    );
  return queue;
}

const runs = new Map<string, Sample[]>();
for (const concurrency of [1, 16]) {
  for (let r = 0; r < reps; r++) {
    // The two take turns, and which goes first alternates: a pair is two samples next to each other
    // in time, so the host's slow spells (minutes long here) mostly land on both of a pair.
    for (const kind of r % 2 === 0 ? ["keel", "plain"] : ["plain", "keel"]) {
      const prefix = `keel-bench-${process.pid}-${kind}-${concurrency}-${r}`;
      const queue = await produce(prefix, warmup + jobs);
      const out = spawnSync(
        process.execPath,
        [
          "--expose-gc",
          "--import",
          "tsx",
          child,
          kind,
          String(jobs),
          String(concurrency),
          String(warmup),
          prefix,
        ],
        { encoding: "utf8" },
      );
      await queue.obliterate({ force: true });
      await queue.close();
      if (out.status !== 0) throw new Error(`${kind}: ${out.stderr}`);
      const key = `${kind} ${concurrency}`;
      runs.set(key, [...(runs.get(key) ?? []), JSON.parse(out.stdout.trim().split("\n").at(-1)!) as Sample]);
    }
  }
}

const median = (xs: number[]) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const perSecond = (key: string) => (jobs * 1000) / median(runs.get(key)!.map((s) => s.runMs));
const cpuPerJobUs = (key: string) => (median(runs.get(key)!.map((s) => s.cpuMs)) * 1000) / jobs;
/** The median over pairs of Keel's jobs/s divided by the plain worker's, each pair run back to back. */
const pairedRatio = (concurrency: number) => {
  const keel = runs.get(`keel ${concurrency}`)!;
  const plain = runs.get(`plain ${concurrency}`)!;
  return median(keel.map((k, i) => plain[i]!.runMs / k.runMs));
};
console.log(
  `| no-op jobs on Redis (${jobs.toLocaleString("en")}), concurrency | jobs/s | CPU per job (this process) | Keel / plain | Keel / plain, paired |`,
);
console.log("| --- | --- | --- | --- | --- |");
for (const concurrency of [1, 16]) {
  const keel = perSecond(`keel ${concurrency}`);
  const plain = perSecond(`plain ${concurrency}`);
  console.log(
    `| Keel useWorker on useBullQueue, ${concurrency} | ${Math.round(keel).toLocaleString("en")} | ${Math.round(cpuPerJobUs(`keel ${concurrency}`))} µs | ${(keel / plain).toFixed(2)}x | ${pairedRatio(concurrency).toFixed(2)}x |`,
  );
  console.log(
    `| plain BullMQ Worker, ${concurrency} | ${Math.round(plain).toLocaleString("en")} | ${Math.round(cpuPerJobUs(`plain ${concurrency}`))} µs | | |`,
  );
}
console.log(
  `\nmedians of ${reps} samples, each its own process after ${warmup.toLocaleString("en")} untimed jobs, the two interleaved, the jobs added by a producer process; node ${process.version}`,
);

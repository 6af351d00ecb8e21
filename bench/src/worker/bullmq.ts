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
 * **Placement** (`--placement=apart,shared`; unpinned by default). On a small host the ratio depends
 * on where the scheduler puts Redis and the worker: with Redis on a core of its own the worker waits
 * on round trips, sharing one they compete for it, and an unpinned run mixes both from sample to
 * sample (a 2-core VM read 0.81x-1.05x in four runs of one build). With `--placement`, every sample
 * runs with Redis pinned to core 0 and the worker to core 1 (`apart`: Redis as its own machine, the
 * layout of a deployment) or both on core 1 (`shared`: the worker's CPU cost per job decides), one
 * table per placement. It needs `taskset` and the right to set the Redis server's affinity (the
 * same user, or root); the affinity Redis had is put back at the end, on an error, and on Ctrl-C.
 *
 * Usage: `npm run bench:worker:bullmq -w @keel/bench [-- --jobs=5000 --warmup=5000 --reps=7
 * --placement=apart,shared]`.
 * @module
 */
import { execFileSync, spawnSync } from "node:child_process";
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

type Placement = "apart" | "shared";
const placements: (Placement | null)[] = (() => {
  const given = process.argv.find((a) => a.startsWith("--placement="))?.split("=")[1];
  if (given === undefined) return [null];
  const list = given.split(",");
  for (const p of list)
    if (p !== "apart" && p !== "shared")
      throw new RangeError(`--placement: expected apart, shared or apart,shared, got ${p}`);
  return list as Placement[];
})();

/** The Redis server's pid and its affinity before the bench, when a placement pins it. */
const pinned = placements[0] === null ? null : pinRedisSetup();

function pinRedisSetup(): { pid: number; restore: () => void } {
  const info = execFileSync("redis-cli", ["-h", "127.0.0.1", "-p", "6379", "info", "server"], {
    encoding: "utf8",
  });
  const pid = Number(/process_id:(\d+)/.exec(info)?.[1]);
  if (!Number.isInteger(pid)) throw new Error("--placement: redis-cli info server gave no process_id");
  const before = /:\s*([0-9,-]+)\s*$/.exec(
    execFileSync("taskset", ["-pc", String(pid)], { encoding: "utf8" }),
  )?.[1];
  if (before === undefined) throw new Error(`--placement: could not read the affinity of Redis (pid ${pid})`);
  let restored = false;
  const restore = () => {
    if (restored) return;
    restored = true;
    execFileSync("taskset", ["-pc", before, String(pid)], { stdio: "ignore" });
  };
  process.on("exit", restore);
  process.on("SIGINT", () => {
    restore();
    process.exit(130);
  });
  return { pid, restore };
}

/**
 * Pins Redis for `placement`, once before its samples, and gives the command prefix that pins each
 * worker sample.
 */
function place(placement: Placement | null): string[] {
  if (pinned === null) return [];
  const core = placement === "apart" ? "0" : "1";
  try {
    execFileSync("taskset", ["-pc", core, String(pinned.pid)], { stdio: "pipe" });
  } catch (e) {
    throw new Error(
      `--placement=${placement}: could not pin Redis (pid ${pinned.pid}) to core ${core}; run the bench as the Redis server's user or as root`,
      { cause: e },
    );
  }
  return ["taskset", "-c", "1"];
}

const runs = new Map<string, Sample[]>();
for (const placement of placements) {
  const [pinCommand, ...pinArgs] = [...place(placement), process.execPath];
  for (const concurrency of [1, 16]) {
    for (let r = 0; r < reps; r++) {
      // The two take turns, and which goes first alternates: a pair is two samples next to each other
      // in time, so the host's slow spells (minutes long here) mostly land on both of a pair.
      for (const kind of r % 2 === 0 ? ["keel", "plain"] : ["plain", "keel"]) {
        const prefix = `keel-bench-${process.pid}-${placement ?? "free"}-${kind}-${concurrency}-${r}`;
        const queue = await produce(prefix, warmup + jobs);
        const out = spawnSync(
          pinCommand!,
          [
            ...pinArgs,
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
        const key = `${placement} ${kind} ${concurrency}`;
        runs.set(key, [
          ...(runs.get(key) ?? []),
          JSON.parse(out.stdout.trim().split("\n").at(-1)!) as Sample,
        ]);
      }
    }
  }
}

const median = (xs: number[]) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
pinned?.restore();
for (const placement of placements) {
  const of = (kind: string, concurrency: number) => runs.get(`${placement} ${kind} ${concurrency}`)!;
  const perSecond = (samples: Sample[]) => (jobs * 1000) / median(samples.map((s) => s.runMs));
  const cpuPerJobUs = (samples: Sample[]) => (median(samples.map((s) => s.cpuMs)) * 1000) / jobs;
  /** The median over pairs of Keel's jobs/s divided by the plain worker's, each pair run back to back. */
  const pairedRatio = (keel: Sample[], plain: Sample[]) =>
    median(keel.map((k, i) => plain[i]!.runMs / k.runMs));
  const where =
    placement === null
      ? ""
      : placement === "apart"
        ? ", Redis on core 0 and the worker on core 1"
        : ", Redis and the worker both on core 1";
  if (placement !== placements[0]) console.log("");
  console.log(
    `| no-op jobs on Redis (${jobs.toLocaleString("en")})${where}, concurrency | jobs/s | CPU per job (this process) | Keel / plain | Keel / plain, paired |`,
  );
  console.log("| --- | --- | --- | --- | --- |");
  for (const concurrency of [1, 16]) {
    const keel = of("keel", concurrency);
    const plain = of("plain", concurrency);
    console.log(
      `| Keel useWorker on useBullQueue, ${concurrency} | ${Math.round(perSecond(keel)).toLocaleString("en")} | ${Math.round(cpuPerJobUs(keel))} µs | ${(perSecond(keel) / perSecond(plain)).toFixed(2)}x | ${pairedRatio(keel, plain).toFixed(2)}x |`,
    );
    console.log(
      `| plain BullMQ Worker, ${concurrency} | ${Math.round(perSecond(plain)).toLocaleString("en")} | ${Math.round(cpuPerJobUs(plain))} µs | | |`,
    );
  }
}
console.log(
  `\nmedians of ${reps} samples, each its own process after ${warmup.toLocaleString("en")} untimed jobs, the two interleaved, the jobs added by a producer process; node ${process.version}`,
);

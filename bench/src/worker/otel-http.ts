/**
 * The OTel worker benchmark (issue 24): jobs of two HTTP GETs each, with OpenTelemetry on, through
 * Keel (`useWorker` on `useBullQueue`, `@keel/otel`, `@keel/core/http`) and through a plain BullMQ
 * `Worker` with undici and `@opentelemetry/instrumentation-undici` and a consumer span per job; with
 * two Keel references: its own client spans (no undici instrumentation), and OpenTelemetry off. See
 * otel-http-child.ts for each kind. Each sample is its own process; the kinds take turns, in an
 * order that rotates every round. This process adds the jobs (a producer of its own) and serves the
 * requests (a keep-alive HTTP server on 127.0.0.1 that answers at once).
 *
 * Usage: `npm run bench:worker:otel -w @keel/bench [-- --jobs=3000 --warmup=1000 --reps=5
 * --concurrency=16 --kinds=keel,plain]`. Prints a table for `bench/results.md`.
 * @module
 */
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";
import { Queue } from "bullmq";

const arg = (name: string, fallback: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? fallback);
const jobs = arg("jobs", 3000);
const warmup = arg("warmup", 1000);
const reps = arg("reps", 5);
const concurrency = arg("concurrency", 16);
const child = fileURLToPath(new URL("./otel-http-child.ts", import.meta.url));
const connection = { host: "127.0.0.1", port: 6379, maxRetriesPerRequest: null };
const ALL_KINDS = ["keel", "plain", "keel-own", "keel-off"] as const;
type Kind = (typeof ALL_KINDS)[number];
/** `--kinds=keel,plain` runs only those (plain always, the ratios' reference). */
const only = process.argv
  .find((a) => a.startsWith("--kinds="))
  ?.split("=")[1]
  ?.split(",");
const KINDS = ALL_KINDS.filter((k) => k === "plain" || !only || only.includes(k));

const server = createServer((_req, res) => res.end("ok")).listen(0, "127.0.0.1");
await new Promise((r) => server.once("listening", r));
const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;

interface Sample {
  runMs: number;
  cpuMs: number;
}
const samples = new Map<Kind, Sample[]>(KINDS.map((k) => [k, []]));
/** Runs one sample of `kind` on jobs added under a fresh prefix; the server answers meanwhile. */
async function sample(kind: Kind, r: number): Promise<Sample> {
  const prefix = `keel-bench-otel-${process.pid}-${kind}-${r}`;
  const queue = new Queue("bench", { connection, prefix });
  for (let i = 0; i < warmup + jobs; i += 1000)
    await queue.addBulk(
      Array.from({ length: Math.min(1000, warmup + jobs - i) }, (_, k) => ({
        name: "job",
        data: { payload: i + k },
      })),
    );
  const args = [
    ...(process.env.BENCH_CHILD_NODE_ARGS?.split(" ").filter(Boolean) ?? []),
    "--expose-gc",
    "--import",
    "tsx",
    child,
    kind,
    String(jobs),
    String(concurrency),
    String(warmup),
    prefix,
    url,
  ];
  // Not `spawnSync`: this process serves the child's requests meanwhile.
  const out = await spawnAsync(process.execPath, args);
  await queue.obliterate({ force: true });
  await queue.close();
  if (out.status !== 0) throw new Error(`${kind}: ${out.stderr}`);
  return JSON.parse(out.stdout.trim().split("\n").at(-1)!) as Sample;
}

function spawnAsync(command: string, args: string[]) {
  return new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
    const p = spawn(command, args);
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (d) => (stdout += d));
    p.stderr.on("data", (d) => (stderr += d));
    p.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

for (let r = 0; r < reps; r++) {
  const order = KINDS.map((_, i) => KINDS[(i + r) % KINDS.length]!);
  for (const kind of order) samples.get(kind)!.push(await sample(kind, r));
}
server.close();

const median = (xs: number[]) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const perSecond = (s: Sample[]) => (jobs * 1000) / median(s.map((x) => x.runMs));
const cpuPerJobUs = (s: Sample[]) => (median(s.map((x) => x.cpuMs)) * 1000) / jobs;
/** Median over rounds of `a`'s jobs/s over `b`'s, both from the same round. */
const paired = (a: Sample[], b: Sample[]) => median(a.map((x, i) => b[i]!.runMs / x.runMs));
const label: Record<Kind, string> = {
  keel: "Keel + @keel/otel, undici instrumentation registered",
  plain: "plain BullMQ Worker + undici, undici instrumentation, a span per job",
  "keel-own": "Keel + @keel/otel, Keel's own client spans",
  "keel-off": "Keel, OpenTelemetry off",
};
const plain = samples.get("plain")!;
console.log(
  `| 2 GETs per job, concurrency ${concurrency} (${jobs.toLocaleString("en")} jobs) | jobs/s | CPU per job | / plain | / plain, paired |`,
);
console.log("| --- | --- | --- | --- | --- |");
for (const kind of KINDS) {
  const s = samples.get(kind)!;
  const ratio = kind === "plain" ? "" : `${(perSecond(s) / perSecond(plain)).toFixed(2)}x`;
  const pairedRatio = kind === "plain" ? "" : `${paired(s, plain).toFixed(2)}x`;
  console.log(
    `| ${label[kind]} | ${Math.round(perSecond(s)).toLocaleString("en")} | ${Math.round(cpuPerJobUs(s))} µs | ${ratio} | ${pairedRatio} |`,
  );
}
console.log(
  `\nmedians of ${reps} rounds, each sample its own process after ${warmup.toLocaleString("en")} untimed jobs, the kinds in turn; node ${process.version}`,
);

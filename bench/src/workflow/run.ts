/**
 * The workflow bench (issue 25): Keel's `@keel/workflow` on its PostgreSQL store against DBOS
 * Transact (`@dbos-inc/dbos-sdk`) on the same local PostgreSQL, two workloads:
 *
 * - `fanout`: 1,000 workflows of 5 no-op steps, 16 at a time: workflows per second;
 * - `sequential`: 1 workflow of 1,000 no-op steps: ms per step.
 *
 * Reference rows, same workloads: Keel on its SQLite store and on its memory store, and the floor
 * (`pg-insert`): one INSERT per step and nothing else (`./pg-child.ts`).
 *
 * Each sample is its own process (`node --expose-gc`), with its own warm-up, on a database of its
 * own (`keel_bench_wf_<pid>_<n>`, created before it and dropped after it, `WITH (FORCE)`; nothing
 * else is touched), or a SQLite file in a temporary folder. Keel and DBOS take turns sample by
 * sample, and which goes first alternates: a pair is two samples next to each other in time, so the
 * machine's slow spells mostly land on both. Two ratios per workload: of the medians, and the median
 * of the pairs' ratios ("paired").
 *
 * Round trips and statements are counted in the child's `pg` client (`./pg-meter.ts`); bytes are
 * the growth of the sample database's relations over the timed part (heap, indexes, TOAST).
 *
 * Usage: `npm run bench:workflow -w @keel/bench [-- --reps=5 --count=1000 --steps=5 --concurrency=16
 * --sequential=1000 --warmup-fanout=500 --warmup-sequential=3000 --workloads=fanout,sequential --peers=keel-postgres,dbos,keel-sqlite,keel-memory,pg-insert]`
 * @module
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import type { Sample, Workload } from "./workloads.js";

const arg = (name: string, fallback: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? fallback);
const list = (name: string, fallback: string[]) =>
  process.argv
    .find((a) => a.startsWith(`--${name}=`))
    ?.split("=")[1]
    ?.split(",") ?? fallback;
const reps = arg("reps", 5);
const count = arg("count", 1000);
const steps = arg("steps", 5);
const concurrency = arg("concurrency", 16);
const sequentialSteps = arg("sequential", 1000);
/**
 * Untimed work before each sample's timed part, in the same process: workflows (fanout) and steps
 * (sequential). Keel's step path reaches its compiled speed later than the one-INSERT floor: after
 * 200 untimed steps, a Keel step on PostgreSQL took 1.12-1.15 ms (CPU 0.79-0.87 ms); after 3,000,
 * 0.70-0.91 ms (CPU 0.48-0.55 ms), the floor's moving far less. A worker runs for hours: measure
 * it warm, and give every library the same warm-up.
 */
const warmupFanout = arg("warmup-fanout", 500);
const warmupSequential = arg("warmup-sequential", 3000);
const workloads = list("workloads", ["fanout", "sequential"]) as Workload[];

type Peer = "keel-postgres" | "dbos" | "keel-sqlite" | "keel-memory" | "pg-insert";
const ALL: Peer[] = ["keel-postgres", "dbos", "keel-sqlite", "keel-memory", "pg-insert"];
const peers = list("peers", ALL) as Peer[];
for (const p of peers)
  if (!ALL.includes(p)) throw new RangeError(`--peers: unknown ${p} (known: ${ALL.join(", ")})`);
const LABEL: Record<Peer, string> = {
  "keel-postgres": "Keel, PostgreSQL store",
  dbos: "DBOS Transact 5.3.0",
  "keel-sqlite": "Keel, SQLite store (synchronous full)",
  "keel-memory": "Keel, memory store",
  "pg-insert": "floor: one INSERT per step (pg)",
};

const BASE = "postgres://postgres@127.0.0.1:5432";
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));

/** Databases this run made and has not dropped yet: dropped on the way out, whatever happens. */
const made = new Set<string>();
async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: `${BASE}/postgres` });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}
let serial = 0;
async function createDatabase(): Promise<string> {
  const name = `keel_bench_wf_${process.pid}_${serial++}`;
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  made.add(name);
  return name;
}
async function dropDatabase(name: string): Promise<void> {
  if (!made.has(name)) return;
  await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  made.delete(name);
}
async function dropAll(): Promise<void> {
  for (const name of [...made]) await dropDatabase(name).catch(() => undefined);
}
process.on("SIGINT", () => {
  void dropAll().finally(() => process.exit(130));
});

async function sample(peer: Peer, workload: Workload): Promise<Sample> {
  const n = workload === "fanout" ? count : 1;
  const s = workload === "fanout" ? steps : sequentialSteps;
  const c = workload === "fanout" ? concurrency : 1;
  const w = workload === "fanout" ? warmupFanout : warmupSequential;
  let where = "";
  let cleanup = async () => {};
  if (peer === "keel-sqlite") {
    const dir = mkdtempSync(join(tmpdir(), "keel-bench-wf-"));
    where = join(dir, "keel.db");
    cleanup = async () => rmSync(dir, { recursive: true, force: true });
  } else if (peer !== "keel-memory") {
    const db = await createDatabase();
    where = `${BASE}/${db}`;
    cleanup = () => dropDatabase(db);
  }
  const [script, extra] =
    peer === "dbos"
      ? ["./dbos-child.ts", []]
      : peer === "pg-insert"
        ? ["./pg-child.ts", []]
        : ["./keel-child.ts", [peer.slice("keel-".length)]];
  try {
    const out = spawnSync(
      process.execPath,
      [
        "--expose-gc",
        "--import",
        "tsx",
        here(script),
        workload,
        where,
        String(n),
        String(s),
        String(c),
        String(w),
        ...extra,
      ],
      { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
    );
    if (out.status !== 0) throw new Error(`${peer} ${workload}: exit ${out.status}\n${out.stderr}`);
    return JSON.parse(out.stdout.trim().split("\n").at(-1)!) as Sample;
  } finally {
    await cleanup();
  }
}

/** Client sessions on the server besides this run's: WAL is server-wide, so say who else wrote. */
const others = () =>
  admin(async (c) => {
    const { rows } = await c.query<{ n: string }>(
      "SELECT count(*) AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND datname NOT LIKE 'keel_bench_wf_%'",
    );
    return Number(rows[0]!.n);
  });
const others0 = await others();
const results = new Map<string, Sample[]>();
const t0 = Date.now();
const load0 = (await import("node:os")).loadavg()[0]!;
try {
  for (const workload of workloads) {
    for (let r = 0; r < reps; r++) {
      const paired: Peer[] = peers.filter((p) => p === "keel-postgres" || p === "dbos");
      const order = [
        ...(r % 2 === 0 ? paired : paired.reverse()),
        ...peers.filter((p) => !paired.includes(p)),
      ];
      for (const peer of order) {
        const s = await sample(peer, workload);
        const key = `${workload} ${peer}`;
        results.set(key, [...(results.get(key) ?? []), s]);
        process.stderr.write(
          `${workload} rep ${r + 1}/${reps} ${peer}: ${s.runMs.toFixed(0)} ms, cpu ${s.cpuMs.toFixed(0)} ms\n`,
        );
      }
    }
  }
} finally {
  await dropAll();
}
const load1 = (await import("node:os")).loadavg()[0]!;
const others1 = await others();

const median = (xs: number[]) => {
  const s = xs.slice().sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const fmt = (x: number, digits = 0) =>
  x.toLocaleString("en", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const lines: string[] = [];
const print = (line = "") => lines.push(line);

for (const workload of workloads) {
  const of = (peer: Peer) => results.get(`${workload} ${peer}`) ?? [];
  const unit = workload === "fanout" ? "workflows/s" : "ms per step";
  const title =
    workload === "fanout"
      ? `${fmt(count)} workflows of ${steps} no-op steps, ${concurrency} at a time`
      : `1 workflow of ${fmt(sequentialSteps)} sequential no-op steps`;
  print(`### ${title}`);
  print();
  print(
    `| library, store | ${unit} | CPU per workflow (this process; of which system) | round trips per step | statements per step | commits per step | table growth per step | WAL per step | samples (${unit}) |`,
  );
  print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const peer of peers) {
    const ss = of(peer);
    if (ss.length === 0) continue;
    const figure = (s: Sample) =>
      workload === "fanout" ? (s.workflows * 1000) / s.runMs : s.runMs / s.steps;
    const m = median(ss.map(figure));
    const cpu = median(ss.map((s) => s.cpuMs / s.workflows));
    const sys = median(ss.map((s) => (s.sysMs ?? 0) / s.workflows));
    const per = (f: (s: Sample) => number | null) => {
      const xs = ss.map(f).filter((x): x is number => x !== null);
      return xs.length === 0 ? "" : fmt(median(xs), 2);
    };
    const perStep = (f: (s: Sample) => number | null) => {
      const xs = ss.map(f).filter((x): x is number => x !== null);
      return xs.length === 0 ? "" : `${fmt(median(xs))} B`;
    };
    print(
      `| ${LABEL[peer]} | ${fmt(m, workload === "fanout" ? 0 : 3)} | ${fmt(cpu, 2)} ms (${fmt(sys, 2)} ms) | ${per((s) => (s.pg ? s.pg.queries / s.steps : null))} | ${per((s) => (s.pg ? s.pg.statements / s.steps : null))} | ${per((s) => (s.pg ? s.pg.commits / s.steps : null))} | ${perStep((s) => (s.bytes === null ? null : s.bytes / s.steps))} | ${perStep((s) => (s.walBytes === null ? null : s.walBytes / s.steps))} | ${ss.map((s) => fmt(figure(s), workload === "fanout" ? 0 : 3)).join(", ")} |`,
    );
  }
  const keel = of("keel-postgres");
  const dbos = of("dbos");
  if (keel.length > 0 && keel.length === dbos.length) {
    const ratio = median(dbos.map((s) => s.runMs)) / median(keel.map((s) => s.runMs));
    const pairs = keel.map((k, i) => dbos[i]!.runMs / k.runMs);
    print();
    print(
      `Keel (PostgreSQL) / DBOS, ${workload === "fanout" ? "workflows/s" : "steps/s"}: **${fmt(ratio, 2)}x** of the medians, **${fmt(median(pairs), 2)}x** paired (pairs: ${pairs.map((p) => fmt(p, 2)).join(", ")}). Target: ≥ 3x.`,
    );
  }
  print();
  for (const peer of ["keel-postgres", "dbos"] as Peer[]) {
    const last = of(peer).at(-1);
    if (!last?.pg) continue;
    print(`<details><summary>${LABEL[peer]}: round trips of the last sample, by statement</summary>`);
    print();
    print("| round trips | per step | statement |");
    print("| --- | --- | --- |");
    for (const [text, n] of Object.entries(last.pg.byText).sort((a, b) => b[1] - a[1]))
      print(`| ${n} | ${fmt(n / last.steps, 2)} | \`${text.replace(/\|/g, "\\|")}\` |`);
    print();
    print("</details>");
    print();
  }
}
print(
  `Medians of ${reps} samples, each its own process after ${fmt(warmupFanout)} untimed workflows (fanout) or ${fmt(warmupSequential)} untimed steps (sequential); Keel and DBOS alternate sample by sample. ${new Date().toISOString().slice(0, 10)}, node ${process.version}, load average ${load0.toFixed(1)} at start and ${load1.toFixed(1)} at end, ${Math.round((Date.now() - t0) / 1000)} s; other client sessions on the PostgreSQL server: ${others0} at start, ${others1} at end (WAL is server-wide). Table growth: the sample database's relations (heap, indexes, TOAST), in whole 8 kB pages.`,
);
console.log(lines.join("\n"));

/**
 * The kernel benchmark: every scenario for every peer, each pair in its own child process, medians
 * printed as one table and written to `bench/results.md`.
 *
 * Usage: `npm run bench [-- --peers=keel,effect] [--scenarios=cancel,heap] [--reps=5]`. A filtered run
 * prints its table but leaves `results.md` alone.
 * @module
 */
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { type PeerId, peerIds } from "./peer.js";
import { interleave } from "./resilience/samples.js";
import { type Scenario, type ScenarioId, scenarios } from "./scenarios.js";

const benchDir = fileURLToPath(new URL("..", import.meta.url));
const childScript = fileURLToPath(new URL("./child.ts", import.meta.url));

const peerNames: Record<PeerId, string> = {
  keel: "Keel",
  "keel-contexts": "Keel, 2 runs in 2 ALS contexts",
  effection: "effection 4.1.1",
  effect: "effect 4.1.0",
  async: "async/await + AbortSignal",
};

interface Plan {
  /** Child processes for this pair, one per round (the rounds interleave the peers). */
  readonly rounds: number;
  /** Measured samples in each of those processes. */
  readonly reps: number;
  /** Warm-up samples in each process before its measured ones. */
  readonly warmup: number;
  /** Tasks per sample, when not the scenario's own `n`. */
  readonly n?: number;
  /** Why this pair runs fewer samples than the others, if it does. */
  readonly cap?: string;
}

const DEFAULT_REPS = 5;
/**
 * Warm-up samples per process, before the measured one. Five, because that is when both Keel's
 * kernel and effect's runtime have settled in every row: with two, the third sample of the cancel
 * row still runs partly in V8's baseline tiers (Keel's per-sample times in one process: 52, 48, 29,
 * 9, 10 ms; effect's: 117, 61, 38, 61, 13 ms), so it measured when each compiler thread got to each
 * function, not the runtime. `--warmup=2` measures that cold state; see bench/README.md.
 */
const DEFAULT_WARMUP = 5;
/** The heap row's figure does not depend on compiled code, and its samples are slow: two warm-ups. */
const HEAP_WARMUP = 2;

/**
 * Caps that keep the whole run near four minutes. effection needs ~13 s for one spawn+join sample
 * and ~15-25 s to set up and halt 100k suspended tasks, so those rows take one sample. Node 20's
 * `AbortSignal.addEventListener` scans every listener already registered (its duplicate check), so
 * registering 100k listeners on one signal takes over a minute; plain async measures its heap per
 * task with 10k tasks (the figure is per task, and the same at 10k and 20k).
 *
 * Every other pair runs `reps` rounds of one process each, with `warmup` warm-ups and one measured
 * sample, and the peers take turns round by round: the machine is shared, and its speed drifts by
 * 30-60 % over a minute, so a peer measured in one block of time would carry that drift into the
 * ratio. Interleaved, every peer's median comes from the same stretch of time.
 */
function planFor(peer: PeerId, id: ScenarioId, reps: number, warmupCount: number): Plan {
  const warmup = id === "heap" ? Math.min(HEAP_WARMUP, warmupCount) : warmupCount;
  if (peer === "effection" && (id === "spawn-join" || id === "spawn-join-shared" || id === "heap")) {
    return { rounds: 1, reps: 1, warmup: 0, cap: "1 sample, no warm-up (one sample takes 13-25 s)" };
  }
  if (peer === "async" && id === "heap") {
    return {
      rounds: reps,
      reps: 1,
      warmup,
      n: 10_000,
      cap: "10k tasks, not 100k: Node 20's addEventListener is linear in the listeners already on the signal",
    };
  }
  return { rounds: reps, reps: 1, warmup };
}

interface Cell {
  readonly samples: number[];
  readonly median: number;
  readonly plan: Plan;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** One child process: `plan.warmup` warm-ups, then `plan.reps` samples of `s` for `peer`. */
function runChild(peer: PeerId, s: Scenario, plan: Plan): number[] {
  const child = spawnSync(
    process.execPath,
    [
      "--expose-gc",
      // No source condition: Keel is measured from its build (dist/), as the peers are from theirs.
      "--import",
      "tsx",
      childScript,
      peer,
      s.id,
      String(plan.n ?? s.n),
      String(plan.reps),
      String(plan.warmup),
    ],
    { cwd: benchDir, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], maxBuffer: 1 << 20 },
  );
  if (child.status !== 0) throw new Error(`bench: ${peer} ${s.id} exited with ${child.status}`);
  const lastLine = child.stdout.trim().split("\n").pop() ?? "";
  return (JSON.parse(lastLine) as { samples: number[] }).samples;
}

/** Every peer's cells for `s`, the peers taking turns round by round (see `planFor`). */
function measureRow(s: Scenario, peers: readonly PeerId[], reps: number, warmup: number): Map<PeerId, Cell> {
  const plans = new Map(peers.map((p) => [p, planFor(p, s.id, reps, warmup)] as const));
  const measured = interleave(
    peers,
    (p) => plans.get(p)!.rounds,
    (p) => runChild(p, s, plans.get(p)!),
  );
  const row = new Map<PeerId, Cell>();
  for (const p of peers) {
    const { samples, wallMs } = measured.get(p)!;
    const cell = { samples, median: median(samples), plan: plans.get(p)! };
    row.set(p, cell);
    console.error(
      `  ${p.padEnd(10)} ${s.id.padEnd(11)} ${format(s, cell.median).padStart(9)}  (${(wallMs / 1000).toFixed(1)} s)`,
    );
  }
  return row;
}

function format(s: Scenario, v: number): string {
  if (s.unit === "B") return `${Math.round(v).toLocaleString("en-US")} B`;
  if (v >= 1000) return `${(v / 1000).toFixed(2)} s`;
  return `${v >= 100 ? v.toFixed(0) : v.toFixed(1)} ms`;
}

function ratio(v: number, keel: number | undefined): string {
  if (keel === undefined || keel === 0) return "";
  const r = v / keel;
  return ` (×${r >= 10 ? r.toFixed(0) : r.toFixed(2)})`;
}

type Results = Map<ScenarioId, Map<PeerId, Cell>>;

const marks = ["¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹"];

/** The capped cells, in table order, each with its footnote mark. */
function footnotes(rows: readonly Scenario[], peers: readonly PeerId[], results: Results) {
  const notes: { id: ScenarioId; peer: PeerId; mark: string; text: string }[] = [];
  for (const s of rows) {
    for (const p of peers) {
      const cap = results.get(s.id)!.get(p)!.plan.cap;
      if (cap) notes.push({ id: s.id, peer: p, mark: marks[notes.length] ?? "*", text: cap });
    }
  }
  return notes;
}

function table(rows: readonly Scenario[], peers: readonly PeerId[], results: Results): string {
  const notes = footnotes(rows, peers, results);
  const header = ["scenario", ...peers.map((p) => peerNames[p])];
  const lines = rows.map((s) => {
    const row = results.get(s.id)!;
    const keel = row.get("keel")?.median;
    return [
      s.title,
      ...peers.map((p) => {
        const c = row.get(p)!;
        return `${format(s, c.median)}${p === "keel" ? "" : ratio(c.median, keel)}${markOf(notes, s.id, p)}`;
      }),
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const fmt = (cells: readonly string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`;
  return [fmt(header), fmt(widths.map((w) => "-".repeat(w))), ...lines.map(fmt)].join("\n");
}

function markOf(notes: ReturnType<typeof footnotes>, id: ScenarioId, peer: PeerId): string {
  const note = notes.find((x) => x.id === id && x.peer === peer);
  return note ? ` ${note.mark}` : "";
}

/**
 * Keel's targets (issue 14), only checked when every peer they mention was measured: spawn+join (a
 * closure per child) and cancel at most 0.8x effect 4, heap per suspended task at most effect 4's,
 * and every other row no slower than effect 4.
 */
const TIGHT: ReadonlySet<ScenarioId> = new Set<ScenarioId>(["spawn-join", "cancel"]);

function targets(results: Results): string[] {
  const get = (id: ScenarioId, p: PeerId) => results.get(id)?.get(p)?.median;
  const out: string[] = [];
  for (const s of scenarios) {
    const keel = get(s.id, "keel");
    const effect = get(s.id, "effect");
    if (keel === undefined || effect === undefined) continue;
    const bound = TIGHT.has(s.id) ? 0.8 : 1;
    const ratio = keel / effect;
    const what = s.unit === "B" ? "per task" : "";
    out.push(
      `${ratio <= bound ? "met " : "MISS"}  ${s.title}: Keel ≤ ${bound === 1 ? "" : `${bound}x `}effect 4${what ? ` ${what}` : ""} (${format(s, keel)} vs ${format(s, effect)}: ${ratio.toFixed(2)}x)`,
    );
  }
  const cancel = get("cancel", "keel");
  const plain = get("cancel", "async");
  if (cancel !== undefined && plain !== undefined) {
    out.push(
      `${cancel <= 2 * plain ? "met " : "MISS"}  cancel 10k within 2× the shared AbortSignal (Keel: ${cancel.toFixed(1)} ms, 2× async: ${(2 * plain).toFixed(1)} ms)`,
    );
  }
  return out;
}

/** The commit measured, and whether core had uncommitted changes (read-only git queries). */
function revision(): string {
  const git = (...args: string[]) =>
    spawnSync("git", args, { cwd: benchDir, encoding: "utf8" }).stdout?.trim() ?? "";
  const head = git("rev-parse", "--short", "HEAD") || "unknown";
  const dirty = git("status", "--porcelain", "--", "../packages/core/src") !== "";
  return `${head}${dirty ? " with uncommitted changes in packages/core/src" : ""}`;
}

function machine(loadAtStart: number): string[] {
  const cpu = os.cpus()[0]?.model.trim() ?? "unknown CPU";
  return [
    `- date: ${new Date().toISOString().slice(0, 10)}; Keel at ${revision()}`,
    `- node ${process.version}, ${os.platform()} ${os.release()} ${os.arch()}`,
    `- nproc ${os.availableParallelism()}, ${cpu}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM; load average ${loadAtStart.toFixed(1)} at start, ${os.loadavg()[0]!.toFixed(1)} at end`,
  ];
}

function samplesSection(rows: readonly Scenario[], peers: readonly PeerId[], results: Results): string[] {
  const out = [
    "| scenario | library | samples (min / median / max) | processes × (warm-up + samples) |",
    "| --- | --- | --- | --- |",
  ];
  for (const s of rows) {
    for (const p of peers) {
      const c = results.get(s.id)!.get(p)!;
      const lo = Math.min(...c.samples);
      const hi = Math.max(...c.samples);
      out.push(
        `| ${s.id} | ${peerNames[p]} | ${format(s, lo)} / ${format(s, c.median)} / ${format(s, hi)} | ${c.plan.rounds} × (${c.plan.warmup} + ${c.plan.reps}) |`,
      );
    }
  }
  return out;
}

interface Args {
  peers?: string[];
  scenarios?: string[];
  reps?: number;
  runs?: number;
  warmup?: number;
}

function parseArgs(argv: readonly string[]): Args {
  const out: Args = {};
  for (const a of argv) {
    const [k, v = ""] = a.replace(/^--/, "").split("=");
    if (k === "peers") out.peers = v.split(",");
    else if (k === "scenarios") out.scenarios = v.split(",");
    else if (k === "reps") out.reps = Number(v);
    else if (k === "runs") out.runs = Number(v);
    else if (k === "warmup") out.warmup = Number(v);
    else
      throw new Error(
        `bench: unknown option ${a} (known: --peers=, --scenarios=, --reps=, --runs=, --warmup=)`,
      );
  }
  if (out.runs !== undefined && !(Number.isInteger(out.runs) && out.runs >= 1))
    throw new Error(`bench: --runs must be a whole number ≥ 1, got ${out.runs}`);
  if (out.warmup !== undefined && !(Number.isInteger(out.warmup) && out.warmup >= 0))
    throw new Error(`bench: --warmup must be a whole number ≥ 0, got ${out.warmup}`);
  return out;
}

/** Keel over effect 4, row by row, one column per run, and whether each row's target held in all. */
function ratiosTable(rows: readonly Scenario[], runs: readonly Results[]): string[] {
  const header = `| row | ${runs.map((_, i) => `run ${i + 1}`).join(" | ")} | target | every run |`;
  const out = [header, `| --- | ${runs.map(() => "---").join(" | ")} | --- | --- |`];
  for (const s of rows) {
    const ratios = runs.map((r) => {
      const keel = r.get(s.id)?.get("keel")?.median;
      const effect = r.get(s.id)?.get("effect")?.median;
      return keel === undefined || effect === undefined ? undefined : keel / effect;
    });
    if (ratios.some((x) => x === undefined)) continue;
    const bound = TIGHT.has(s.id) ? 0.8 : 1;
    const held = ratios.every((x) => x! <= bound);
    out.push(
      `| ${s.title} | ${ratios.map((x) => `${x!.toFixed(2)}x`).join(" | ")} | ≤ ${bound.toFixed(1)}x | ${held ? "met" : "MISSED"} |`,
    );
  }
  return out;
}

/** What other benches wrote below the kernel's part of results.md, kept as it is. */
function otherSections(file: URL): string {
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return "";
  }
  const at = text.indexOf("\n## Worker");
  return at < 0 ? "" : text.slice(at + 1);
}

function main(): void {
  const args = parseArgs(process.argv.slice(2));
  const peers = peerIds.filter((p) => !args.peers || args.peers.includes(p));
  const rows = scenarios.filter((s) => !args.scenarios || args.scenarios.includes(s.id));
  const reps = args.reps ?? DEFAULT_REPS;
  const runCount = args.runs ?? 1;
  const warmup = args.warmup ?? DEFAULT_WARMUP;
  const full =
    peers.length === peerIds.length &&
    rows.length === scenarios.length &&
    reps === DEFAULT_REPS &&
    warmup === DEFAULT_WARMUP;
  const t0 = performance.now();
  const runs: Results[] = [];
  const sections: string[] = [];
  for (let k = 0; k < runCount; k++) {
    const loadAtStart = os.loadavg()[0]!;
    const started = performance.now();
    const results: Results = new Map();
    if (runCount > 1) console.error(`\n# run ${k + 1} of ${runCount}`);
    for (const s of rows) {
      console.error(`${s.title}:`);
      results.set(s.id, measureRow(s, peers, reps, warmup));
    }
    runs.push(results);
    const runS = ((performance.now() - started) / 1000).toFixed(0);
    const tbl = table(rows, peers, results);
    const goals = targets(results);
    console.log(
      `\n${runCount > 1 ? `run ${k + 1}:\n` : ""}${tbl}\n\nKeel's targets:\n${goals.map((g) => `  ${g}`).join("\n")}`,
    );
    console.log(`\nmachine:\n${machine(loadAtStart).join("\n")}\nrun ${runS} s`);
    sections.push(
      [
        `## ${runCount > 1 ? `Run ${k + 1} of ${runCount}` : "The run"}`,
        "",
        ...machine(loadAtStart),
        `- this run: ${runS} s`,
        "",
        tbl,
        "",
        ...goals.map((g) => `- ${g}`),
        "",
        `### Samples${runCount > 1 ? ` of run ${k + 1}` : ""}`,
        "",
        ...samplesSection(rows, peers, results),
        "",
      ].join("\n"),
    );
  }
  const totalS = ((performance.now() - t0) / 1000).toFixed(0);
  const legend = [
    `Medians of ${reps} samples, each from its own node process (--expose-gc) after ${warmup} warm-ups in`,
    "that process; the libraries take turns sample by sample, so each median spans the same stretch of",
    "time. In parentheses: the peer's median divided by Keel's (below 1: the peer is faster or",
    "smaller). Times are wall-clock for the whole scenario; heap is heapUsed after gc, per task.",
    `The heap row takes ${Math.min(HEAP_WARMUP, warmup)} warm-ups (its figure does not depend on compiled code).`,
    ...footnotes(rows, peers, runs[0]!).map((x) => `${x.mark} ${peerNames[x.peer]}, ${x.id}: ${x.text}.`),
  ];
  const summary = ratiosTable(rows, runs);
  console.log(
    `\n${legend.join("\n")}\n\nKeel / effect 4, run by run:\n${summary.join("\n")}\ntotal ${totalS} s`,
  );
  if (!full) {
    console.log("\n(filtered run: bench/results.md left unchanged)");
    return;
  }
  const file = new URL("../results.md", import.meta.url);
  const rest = otherSections(file);
  const md = [
    "# Kernel benchmark results",
    "",
    "Written by `npm run bench` (bench/src/run.ts); see bench/README.md for what each scenario does.",
    `${runCount} run${runCount > 1 ? "s" : ""} back to back, ${totalS} s in all.`,
    "",
    "## Keel / effect 4, run by run",
    "",
    "Issue 14's targets: spawn+join (a closure per child) and cancel at most 0.8x effect 4 in every run,",
    "heap per suspended task at most effect 4's, every other row no slower than effect 4.",
    "",
    ...summary,
    "",
    ...legend,
    "",
    ...sections,
    rest,
  ].join("\n");
  writeFileSync(file, md.endsWith("\n") ? md : `${md}\n`);
  console.log("\nwritten to bench/results.md");
}

main();

/**
 * The resilience benchmark: Keel's retry and semaphore beside cockatiel 3.2.1 and p-retry 7.1.1 /
 * p-limit 7.3.3, each (library, row) pair in its own child process, medians printed as one markdown
 * table with ratios to the fastest and Keel's target (within 1.5× of the fastest on each row).
 *
 * Keel runs from its build: run `npm run build -w @keel/core` first (the children refuse the sources).
 *
 * Usage (from bench/): `node --import tsx src/resilience/run.ts [--reps=5]`
 * @module
 */
import os from "node:os";
import { fileURLToPath } from "node:url";
import { machine, markdownTable, times } from "./machine.js";
import { type LibraryId, libraryIds, PERMITS, type RowId } from "./peer.js";
import { interleave, median, runChild } from "./samples.js";

const childScript = fileURLToPath(new URL("./child.ts", import.meta.url));

const libraryNames: Record<LibraryId, string> = {
  keel: "Keel",
  cockatiel: "cockatiel 3.2.1",
  p: "p-retry 7.1.1 / p-limit 7.3.3",
};

interface Row {
  readonly id: RowId;
  readonly title: string;
  /** Calls or tasks per sample. */
  readonly n: number;
  /** A library's own count, where `n` would make its samples too short to leave the JIT's warm-up. */
  readonly nFor?: Partial<Record<LibraryId, number>>;
  readonly warmup: number;
  /** Turns a sample's milliseconds into the figure shown. */
  readonly figure: (ms: number, n: number) => number;
  readonly format: (v: number) => string;
  /** A second reading of the median (throughput), shown beside it. */
  readonly extra?: (v: number) => string;
}

const reps = Number(process.argv.find((a) => a.startsWith("--reps="))?.slice(7) ?? 5);

const rows: readonly Row[] = [
  {
    id: "retry",
    title: "retry: fails twice, then succeeds; delays 0 (µs per call)",
    // cockatiel waits for a host timer per delay (≥ 1 ms each), so 400 calls take ~1 s. Keel and
    // p-retry start a zero delay's attempt without one: 400 calls are ~10 ms, short enough that a
    // sample still measures the JIT warming up, so they get 4,000.
    n: 400,
    nFor: { keel: 4000, p: 4000 },
    warmup: 1,
    figure: (ms, n) => (ms * 1000) / n,
    format: (v) => `${v >= 100 ? Math.round(v).toLocaleString("en-US") : v.toFixed(1)} µs`,
  },
  {
    id: "semaphore",
    title: `semaphore: 10k tasks over ${PERMITS} permits, one microtask each (ms per 10k)`,
    n: 10_000,
    // Throughput is a steady-state figure, and one sample is short (10k items, 20-40 ms). In a fresh
    // process Keel's first samples take about 140, 90 and 55 ms before its kernel is optimized;
    // cockatiel's and p-limit's settle after one or two. Five warm-ups, for every library alike.
    warmup: 5,
    figure: (ms) => ms,
    format: (v) => `${v.toFixed(1)} ms`,
    extra: (v) => `${Math.round(10_000 / v).toLocaleString("en-US")}k tasks/s`,
  },
];

interface Cell {
  readonly samples: readonly number[];
  readonly median: number;
}

function measure(lib: LibraryId, row: Row, n = row.n): Cell {
  const t0 = performance.now();
  const samples = runChild(childScript, [lib, row.id, String(n), String(reps), String(row.warmup)]).map((s) =>
    row.figure(s.ms!, n),
  );
  const cell = { samples, median: median(samples) };
  console.error(
    `  ${lib.padEnd(10)} ${row.id.padEnd(10)} ${row.format(cell.median).padStart(10)}  (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
  );
  return cell;
}

/** Every library's cell for `row`: `reps` samples each, one process per sample, taking turns. */
function measureRow(row: Row): Map<LibraryId, Cell> {
  const measured = interleave(
    libraryIds,
    () => reps,
    (lib) => {
      const n = row.nFor?.[lib] ?? row.n;
      return runChild(childScript, [lib, row.id, String(n), "1", String(row.warmup)]).map((x) =>
        row.figure(x.ms!, n),
      );
    },
  );
  const cells = new Map<LibraryId, Cell>();
  for (const lib of libraryIds) {
    const { samples, wallMs } = measured.get(lib)!;
    const cell = { samples, median: median(samples) };
    cells.set(lib, cell);
    console.error(
      `  ${lib.padEnd(10)} ${row.id.padEnd(10)} ${row.format(cell.median).padStart(10)}  (${(wallMs / 1000).toFixed(1)} s)`,
    );
  }
  return cells;
}

/**
 * What two host timers of 0 ms in a row cost here (µs): the floor of a retry whose two delays of 0 each
 * wait for a `setTimeout(…, 0)`, which Node clamps to 1 ms.
 */
async function twoZeroTimersUs(calls: number): Promise<number> {
  const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 0));
  const t0 = performance.now();
  for (let i = 0; i < calls; i++) {
    await tick();
    await tick();
  }
  return ((performance.now() - t0) * 1000) / calls;
}

async function main(): Promise<void> {
  const loadAtStart = os.loadavg()[0]!;
  const started = performance.now();
  const timerFloorUs = await twoZeroTimersUs(rows[0]!.n);
  console.error(
    `resilience bench: ${reps} samples per cell, each in its own process, libraries taking turns`,
  );
  const results = new Map<RowId, Map<LibraryId, Cell>>();
  for (const row of rows) {
    results.set(row.id, measureRow(row));
  }
  const semaphore = rows[1]!;
  const fanOut = measure("keel", { ...semaphore, id: "map-limit" });

  const verdicts: string[] = [];
  const table = markdownTable([
    ["row", ...libraryIds.map((l) => libraryNames[l]), "Keel ÷ fastest", "target ≤ ×1.5"],
    ...rows.map((row) => {
      const cells = results.get(row.id)!;
      const fastest = Math.min(...[...cells.values()].map((c) => c.median));
      const keel = cells.get("keel")!.median;
      const ok = keel <= 1.5 * fastest;
      verdicts.push(`${ok ? "PASS" : "MISS"}  ${row.title}: Keel ${times(keel / fastest)} the fastest`);
      return [
        row.title,
        ...libraryIds.map((l) => {
          const m = cells.get(l)!.median;
          return `${row.format(m)}${row.extra ? `, ${row.extra(m)}` : ""} (${times(m / fastest)})`;
        }),
        times(keel / fastest),
        ok ? "PASS" : "MISS",
      ];
    }),
  ]);
  const pLimit = results.get("semaphore")!.get("p")!.median;
  const lines = [
    "## Resilience: retry and semaphore",
    "",
    ...machine(loadAtStart),
    `- ${reps} samples per cell, each in its own \`node --import tsx\` process after the row's warm-ups, the libraries taking turns sample by sample; Keel from packages/core/dist`,
    "",
    table,
    "",
    `For reading the retry row: two \`setTimeout(…, 0)\` in a row take ${rows[0]!.format(timerFloorUs)} on this machine (Node clamps 0 to 1 ms); a retry that waits for a host timer per delay cannot go below that.`,
    "",
    `Not a target row: the semaphore row's work through Keel's \`mapLimit(items, ${PERMITS}, fn)\` (${PERMITS} worker tasks, not one task per item): ${semaphore.format(fanOut.median)} (${times(fanOut.median / pLimit)} p-limit).`,
    "",
    "Samples:",
    "",
    ...rows.flatMap((row) =>
      libraryIds.map(
        (l) =>
          `- ${row.id}, ${libraryNames[l]}: ${results
            .get(row.id)!
            .get(l)!
            .samples.map((v) => row.format(v))
            .join(", ")}`,
      ),
    ),
    `- map-limit, Keel: ${fanOut.samples.map((v) => semaphore.format(v)).join(", ")}`,
    "",
    ...verdicts,
    "",
    `(${((performance.now() - started) / 1000).toFixed(0)} s)`,
  ];
  console.log(lines.join("\n"));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});

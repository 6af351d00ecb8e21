/**
 * Running one measurement in its own child process, taking turns between libraries, and reducing
 * samples (median, p99). Shared by the resilience and HTTP benchmarks (`interleave` by the kernel's).
 * @module
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The bench workspace: every child runs here, so "@keel/core" resolves to the bench's dependency. */
export const benchDir = fileURLToPath(new URL("../..", import.meta.url));

/** One sample: named figures (`ms`, `rps`, `p99Ms`, ...). */
export type Sample = Record<string, number>;

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** The nearest-rank quantile `q` (0 < q ≤ 1) of `xs`. */
export function quantile(xs: ArrayLike<number>, q: number): number {
  const s = Float64Array.from(xs).sort();
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
}

/**
 * Runs `script` (a .ts file) with `args` in a fresh `node --import tsx` process and returns the
 * samples it prints as its last stdout line (`{"samples":[...]}`). There is deliberately no
 * `--conditions=source`: "@keel/core" must resolve to packages/core/dist, the build under test.
 */
export function runChild(
  script: string,
  args: readonly string[],
  nodeFlags: readonly string[] = [],
): Sample[] {
  const child = spawnSync(
    process.execPath,
    ["--expose-gc", ...nodeFlags, "--import", "tsx", script, ...args],
    {
      cwd: benchDir,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
      maxBuffer: 1 << 22,
      // A NODE_OPTIONS with --conditions=source would silently measure the TypeScript sources.
      env: { ...process.env, NODE_OPTIONS: "" },
    },
  );
  if (child.status !== 0) throw new Error(`bench: ${script} ${args.join(" ")} exited with ${child.status}`);
  const lastLine = child.stdout.trim().split("\n").pop() ?? "";
  return (JSON.parse(lastLine) as { samples: Sample[] }).samples;
}

/**
 * Measures every id in turn, round by round, `roundsFor(id)` rounds each (one `measure(id)` call per
 * round, typically one child process and one sample). The machine is shared and its speed drifts by
 * 30-60 % within a minute: measured in one block each, a library carried its block's drift into the
 * ratio; taking turns, every library's samples span the same stretch of time. Returns each id's
 * samples in order and the wall time spent measuring it.
 */
export function interleave<Id extends string, S>(
  ids: readonly Id[],
  roundsFor: (id: Id) => number,
  measure: (id: Id) => readonly S[],
): Map<Id, { samples: S[]; wallMs: number }> {
  const out = new Map(ids.map((id) => [id, { samples: [] as S[], wallMs: 0 }]));
  const rounds = Math.max(0, ...ids.map(roundsFor));
  for (let round = 0; round < rounds; round++) {
    for (const id of ids) {
      if (round >= roundsFor(id)) continue;
      const cell = out.get(id)!;
      const t0 = performance.now();
      cell.samples.push(...measure(id));
      cell.wallMs += performance.now() - t0;
    }
  }
  return out;
}

/**
 * Throws unless "@keel/core" resolves to its build: a child measuring the sources through tsx's
 * transform would report the loader's cost, not Keel's.
 */
export function assertKeelBuilt(): void {
  for (const specifier of ["@keel/core", "@keel/core/http"]) {
    const where = import.meta.resolve(specifier);
    if (!where.includes("/packages/core/dist/")) {
      throw new Error(
        `bench: ${specifier} resolved to ${where}, not packages/core/dist (run npm run build -w @keel/core, and drop --conditions=source)`,
      );
    }
  }
}

/** Prints the child's samples as the one JSON line its parent reads. */
export function report(samples: readonly Sample[]): void {
  process.stdout.write(`${JSON.stringify({ samples })}\n`);
}

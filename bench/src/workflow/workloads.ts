/**
 * The workflow bench's two workloads, driven the same way for every library, and the one JSON line a
 * sample prints.
 *
 * - `fanout`: `count` workflows of `steps` no-op steps, `concurrency` at a time: `concurrency` lanes,
 *   each starting a workflow under an id of its own and waiting for its result before the next.
 *   Timed from the first start to the last result: workflows per second.
 * - `sequential`: one workflow of `steps` no-op steps in a row: ms per step.
 *
 * Before the timed part, the same process runs `warmup` untimed: as many workflows (fanout) or a
 * workflow of as many steps (sequential), so the figures are a running process's, not the JIT's
 * warm-up. The database's counts and sizes are taken around the timed part only.
 * @module
 */
import { type PgCounts, takePgCounts } from "./pg-meter.js";

export type Workload = "fanout" | "sequential";

export interface ChildArgs {
  readonly workload: Workload;
  /** The sample's database (a connection string), or a file path for SQLite, or "" for memory. */
  readonly url: string;
  /** Workflows timed (1 for sequential). */
  readonly count: number;
  /** Steps per workflow. */
  readonly steps: number;
  readonly concurrency: number;
  readonly warmup: number;
}

/** `workload url count steps concurrency warmup`, as the parent passes them. */
export function parseChildArgs(argv: readonly string[]): ChildArgs & { rest: string[] } {
  const [workload, url, count, steps, concurrency, warmup, ...rest] = argv;
  if (workload !== "fanout" && workload !== "sequential")
    throw new RangeError(`workload: expected fanout or sequential, got ${workload}`);
  return {
    workload,
    url: url ?? "",
    count: Number(count),
    steps: Number(steps),
    concurrency: Number(concurrency),
    warmup: Number(warmup),
    rest,
  };
}

/** One sample, as a child prints it. */
export interface Sample {
  readonly runMs: number;
  /** This process's CPU time (user + system) over the timed part. */
  readonly cpuMs: number;
  /** Of which in the kernel (system time): on loopback TCP, sending a query also delivers it. */
  readonly sysMs: number;
  readonly workflows: number;
  readonly steps: number;
  /** The database's round trips over the timed part (PostgreSQL samples only). */
  readonly pg: PgCounts | null;
  /** Bytes the store grew by over the timed part (relations, or the SQLite files), or null. */
  readonly bytes: number | null;
  /** The server's WAL growth over the timed part (PostgreSQL samples only; server-wide). */
  readonly walBytes: number | null;
}

export interface Driver extends ChildArgs {
  /** Starts a workflow of `steps` steps under an id beginning with `prefix`, and waits for its result. */
  run(prefix: string, steps: number): PromiseLike<unknown>;
  /** The store's size in bytes now, or null when it has none to measure. */
  size?: () => Promise<number>;
  /** The server's WAL position in bytes (PostgreSQL only). */
  wal?: () => Promise<number>;
}

/** Runs `count` workflows of `steps`, `concurrency` lanes at once. */
async function lanes(d: Driver, prefix: string, count: number, steps: number): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < count) {
      next++;
      await d.run(prefix, steps);
    }
  };
  await Promise.all(Array.from({ length: Math.min(d.concurrency, count) }, lane));
}

const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});

/** The warm-up, then the timed part, measured. */
export async function measure(d: Driver): Promise<Sample> {
  if (d.workload === "fanout") {
    if (d.warmup > 0) await lanes(d, "warm", d.warmup, d.steps);
  } else if (d.warmup > 0) await d.run("warm", d.warmup);
  const before = d.size ? await d.size() : null;
  const wal0 = d.wal ? await d.wal() : null;
  gc();
  takePgCounts();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  if (d.workload === "fanout") await lanes(d, "timed", d.count, d.steps);
  else await d.run("timed", d.steps);
  const runMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const pg = takePgCounts();
  const wal1 = d.wal ? await d.wal() : null;
  const after = d.size ? await d.size() : null;
  const workflows = d.workload === "fanout" ? d.count : 1;
  return {
    runMs,
    cpuMs: (cpu.user + cpu.system) / 1000,
    sysMs: cpu.system / 1000,
    workflows,
    steps: workflows * d.steps,
    pg: pg.queries > 0 ? pg : null,
    bytes: before === null || after === null ? null : after - before,
    walBytes: wal0 === null || wal1 === null ? null : wal1 - wal0,
  };
}

/**
 * What a worker counts (outcomes, durations) and what its shutdown reports.
 * @module
 */
import type { DeadLetterReason } from "./engine.js";
import type { EngineHealthReading } from "./engine-health.js";

/**
 * A worker's counts since it started, with `waiting` read from the engine.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createMemoryQueue, useWorker, type WorkerStats } from "@keel/worker";
 * const stats: WorkerStats = await run(function* () {
 *   const queue = yield* createMemoryQueue<number>({ name: "n" });
 *   const worker = yield* useWorker(queue, function* double(job) { return job.data * 2; });
 *   yield* queue.add(21);
 *   while ((yield* worker.stats()).completed < 1) yield* queue.idle();
 *   return yield* worker.stats();
 * });
 * console.log(stats.completed, stats.inFlight, stats.deadLettered.rejected, stats.engine.state); // 1 0 0 up
 * ```
 */
export interface WorkerStats {
  readonly completed: number;
  /** Deliveries that failed and were scheduled again. */
  readonly retried: number;
  readonly deadLettered: { readonly [R in DeadLetterReason]: number };
  /** Jobs put back at shutdown without spending an attempt. */
  readonly released: number;
  /**
   * Deliveries whose outcome could not be recorded (the engine did not answer within
   * `engineTimeoutMs`, or no longer held the job for this process): the engine's own recovery puts
   * those jobs back (BullMQ's stalled check).
   */
  readonly stalled: number;
  readonly inFlight: number;
  /** Jobs waiting or delayed in the engine (the last reading while the engine is down; `NaN` before any). */
  readonly waiting: number;
  /** Whether the engine answers (`down` after a call failed or ran past `engineTimeoutMs`), and since when. */
  readonly engine: EngineHealthReading;
  /** Handler durations of completed jobs, over the last 10,000 (ms, to a tenth; `NaN` before the first). */
  readonly durationMs: { readonly p50: number; readonly p99: number };
}

/**
 * What a worker's shutdown did, step by step.
 *
 * @example
 * ```ts
 * import type { ShutdownReport } from "@keel/worker";
 * const report: ShutdownReport = {
 *   inFlightAtStop: 3, finishedInDrain: 2, released: 1, cutTree: "", closeTimedOut: false, elapsedMs: 120,
 * };
 * // Every job in flight at the stop either finished in the drain or was cut and released (a BullMQ
 * // job fetched ahead and never taken is released too, without having been in flight).
 * console.log(report.finishedInDrain + report.released >= report.inFlightAtStop); // true
 * ```
 */
export interface ShutdownReport {
  /** Jobs in flight when the worker stopped taking. */
  readonly inFlightAtStop: number;
  /** Of those, the ones that ended (any outcome) within `drainMs`. */
  readonly finishedInDrain: number;
  /**
   * Jobs put back without spending an attempt: the cut ones, and any the engine had fetched ahead
   * for a take that never came (BullMQ).
   */
  readonly released: number;
  /** The task tree of the deliveries it had to cut, as `formatTaskTree` prints it ("" when none). */
  readonly cutTree: string;
  /** True when the engine's `close` did not finish within `closeCapMs`, or was not tried (the engine was down). */
  readonly closeTimedOut: boolean;
  readonly elapsedMs: number;
}

const WINDOW = 10_000;

/** Outcome counters and a ring of recent durations. */
export class Counters {
  completed = 0;
  retried = 0;
  released = 0;
  stalled = 0;
  readonly deadLettered = { expired: 0, exhausted: 0, rejected: 0, stalled: 0, abandoned: 0 };
  private readonly durations: number[] = [];
  private next = 0;

  recordDuration(ms: number): void {
    if (this.durations.length < WINDOW) this.durations.push(ms);
    else this.durations[this.next] = ms;
    this.next = (this.next + 1) % WINDOW;
  }

  snapshot(inFlight: number, waiting: number, engine: EngineHealthReading): WorkerStats {
    const sorted = this.durations.slice().sort((a, b) => a - b);
    // Rounded to a tenth of a millisecond: a real clock's durations (`107.455322265625`) are read
    // by people, in dashboards and logs, and the digits past it are noise.
    const pick = (q: number) =>
      sorted.length === 0
        ? NaN
        : Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! * 10) / 10;
    return {
      completed: this.completed,
      retried: this.retried,
      deadLettered: { ...this.deadLettered },
      released: this.released,
      stalled: this.stalled,
      inFlight,
      waiting,
      engine,
      durationMs: { p50: pick(0.5), p99: pick(0.99) },
    };
  }
}

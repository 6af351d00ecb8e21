/**
 * What every library implements for the resilience benchmark, each in its own idiom.
 * @module
 */

export type LibraryId = "keel" | "cockatiel" | "p";
export const libraryIds: readonly LibraryId[] = ["keel", "cockatiel", "p"];

export type RowId = "retry" | "semaphore" | "map-limit";

export interface ResiliencePeer {
  /**
   * `n` retried calls one after another, each of an operation that fails twice with a retryable error
   * (an `Error` with `status: 503`) and succeeds on its third attempt; every delay is 0.
   */
  retryTwice(n: number): Promise<void>;
  /** `n` tasks through one limiter of 10 permits, each holding its permit for one microtask. */
  semaphore(n: number): Promise<void>;
  /**
   * The same work as `semaphore`, through the library's bounded fan-out when it has one that is not
   * the limiter itself (Keel's `mapLimit`: 10 worker tasks instead of one task per item).
   */
  mapLimit?(n: number): Promise<void>;
}

/** The permits of the semaphore row. */
export const PERMITS = 10;

/** The retryable failure every library sees: same shape, so the same stack-capture cost. */
export function unavailable(): Error {
  return Object.assign(new Error("unavailable"), { status: 503 });
}

/**
 * Checks a library did the work: every call made exactly three attempts, every task ran, and the
 * limiter let exactly `PERMITS` hold at once. Throws otherwise, so a broken peer cannot look fast.
 */
export function checkRetry(n: number, attempts: number): void {
  if (attempts !== 3 * n)
    throw new Error(`bench: expected ${3 * n} attempts for ${n} calls, saw ${attempts}`);
}

export interface Occupancy {
  active: number;
  peak: number;
  done: number;
}

export function checkSemaphore(n: number, o: Occupancy): void {
  if (o.done !== n || o.active !== 0 || o.peak !== PERMITS) {
    throw new Error(
      `bench: ${n} tasks over ${PERMITS} permits ended with done ${o.done}, active ${o.active}, peak ${o.peak}`,
    );
  }
}

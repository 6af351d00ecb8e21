/**
 * `Cancelled`, the signal that cancellation is delivered as, and the reason it carries.
 * @module
 */

/** Why a task or a scope's region is being cancelled. */
export interface CancelReason {
  /**
   * What asked: `"cancel"` (`task.cancel()`), `"timeout"` (a timeout scope fired), `"child-failed"`
   * (a group whose child failed), `"parent"` (the owning scope finished), `"shutdown"` (a signal to
   * `main`), `"cleanup-overrun"` (the cleanup budget ran out), `"race-lost"` (another racer won).
   */
  readonly kind:
    | "cancel"
    | "timeout"
    | "child-failed"
    | "parent"
    | "shutdown"
    | "cleanup-overrun"
    | "race-lost"
    | (string & {});
  /** The clock's time of the request. */
  readonly at: number;
  /** A human text: the message given to `cancel(message)`, or what the scope states. */
  readonly message?: string;
  /** The scope that made the request, for requests made by a scope. */
  readonly scope?: ScopeInfo;
}

/** A scope as named in reasons, events and snapshots. */
export interface ScopeInfo {
  readonly id: number;
  readonly kind: string;
  readonly label: string;
}

const CANCELLED_BRAND = Symbol.for("keel.cancelled");

/**
 * The signal thrown at a task's suspension point when it is cancelled.
 *
 * It is deliberately not an `Error`: a `catch (e)` that handles errors should let it pass, and
 * `isCancelled(e)` says which is which. Rethrow it; a swallowed `Cancelled` only delays the task by at
 * most its cleanup budget, is reported, and never changes the outcome (semantics §1, §5).
 *
 * @example
 * ```ts
 * import { isCancelled, run, suspend } from "@keel/core";
 * const task = run(function* worker() {
 *   try { yield* suspend(); } catch (e) { if (isCancelled(e)) console.log(e.reason.kind); throw e; }
 * });
 * await task.cancel("deploy"); // logs "cancel"
 * ```
 */
export class Cancelled {
  readonly [CANCELLED_BRAND] = true;
  readonly name = "Cancelled";
  constructor(readonly reason: CancelReason) {}
  /** The reason in words, for logs. */
  get message(): string {
    return describeReason(this.reason);
  }
  toString(): string {
    return `Cancelled: ${this.message}`;
  }
}

/** True when `e` is the cancellation signal (works across duplicate package copies). */
export function isCancelled(e: unknown): e is Cancelled {
  return typeof e === "object" && e !== null && (e as Record<symbol, unknown>)[CANCELLED_BRAND] === true;
}

/** A reason in words: "cancelled (deploy)", "timed out after 100 ms". */
export function describeReason(reason: CancelReason): string {
  if (reason.message) return `${reason.kind}: ${reason.message}`;
  return reason.kind;
}

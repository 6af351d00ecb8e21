/**
 * `Cancelled`, the signal that cancellation is delivered as, and the reason it carries.
 * @module
 */
import { shapes } from "./shapes.js";

/**
 * Why a task or a scope's region is being cancelled.
 *
 * @example
 * ```ts
 * import { type CancelReason, isCancelled, run, sleep, timeout } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * let reason: CancelReason | undefined;
 * await run(function* () {
 *   try {
 *     yield* timeout(100, function* slow() {
 *       try { yield* sleep(1000); } catch (e) { if (isCancelled(e)) reason = e.reason; throw e; }
 *     });
 *   } catch {} // the TimeoutError
 * }, { clock: createVirtualClock() });
 * console.log(reason?.kind, reason?.at, reason?.scope?.label); // timeout 100 timeout(100)
 * ```
 */
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

/**
 * A scope as named in reasons, events and snapshots.
 *
 * @example
 * ```ts
 * import { run, type ScopeInfo, sleep, timeout } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const fired: ScopeInfo[] = [];
 * await run(function* () {
 *   try { yield* timeout(50, sleep(100)); } catch {}
 * }, { clock: createVirtualClock(), onEvent: (e) => { if (e.type === "timeout:fire") fired.push(e.scope); } });
 * console.log(fired.map((s) => `${s.kind} ${s.label}`)); // ["timeout timeout(50)"]
 * ```
 */
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
  declare readonly [CANCELLED_BRAND]: true;
  declare readonly name: "Cancelled";
  constructor(readonly reason: CancelReason) {
    shapes.cancelled = this;
  }
  /** The reason in words, for logs. */
  get message(): string {
    return describeReason(this.reason);
  }
  toString(): string {
    return `Cancelled: ${this.message}`;
  }
}

// The brand and the name live on the prototype: one is made per delivery, so each carries only its
// reason. `isCancelled` finds the brand through the prototype chain all the same.
Object.defineProperty(Cancelled.prototype, CANCELLED_BRAND, { value: true });
Object.defineProperty(Cancelled.prototype, "name", { value: "Cancelled" });

/**
 * True when `e` is the cancellation signal (works across duplicate package copies).
 *
 * @example
 * ```ts
 * import { isCancelled, run, sleep, spawn } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const seen: string[] = [];
 * await run(function* () {
 *   const poller = yield* spawn(function* poll() {
 *     for (;;) {
 *       try { yield* sleep(100); } catch (e) {
 *         if (isCancelled(e)) { seen.push("cancelled: rethrown"); throw e; } // never swallow it
 *         seen.push("an error: handled");
 *       }
 *     }
 *   });
 *   yield* sleep(250);
 *   yield* poller.cancel();
 * }, { clock: createVirtualClock() });
 * console.log(seen); // ["cancelled: rethrown"]
 * ```
 */
export function isCancelled(e: unknown): e is Cancelled {
  if (typeof e !== "object" || e === null) return false;
  // A thrown Proxy whose `get` trap throws (or a revoked one) is not a Cancelled, and asking must not
  // throw: this runs in every `catch` of the runtime, and would replace the value in flight.
  try {
    return (e as Record<symbol, unknown>)[CANCELLED_BRAND] === true;
  } catch {
    return false;
  }
}

/** A reason in words: "cancelled (deploy)", "timed out after 100 ms". */
export function describeReason(reason: CancelReason): string {
  if (reason.message) return `${reason.kind}: ${reason.message}`;
  return reason.kind;
}

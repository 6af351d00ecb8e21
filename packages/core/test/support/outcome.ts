/**
 * Running an operation and reading how and when it ended, without throwing.
 * @module
 */
import type { Operation } from "@keel/core";
import type { Harness } from "@keel/testing";

/** How and when an operation ended. */
export interface Outcome<T> {
  readonly ok: boolean;
  readonly value?: T;
  readonly error?: unknown;
  /** When the outcome reached the caller. */
  readonly at: number;
  /** Timers pending at that moment. */
  readonly timers: number;
}

/** Runs `op` and reports how and when it ended, instead of throwing (a cancellation included). */
export function* outcome<T>(h: Harness, op: Operation<T>): Operation<Outcome<T>> {
  try {
    const value = yield* op;
    return { ok: true, value, at: h.clock.now(), timers: h.clock.pendingTimers };
  } catch (error) {
    return { ok: false, error, at: h.clock.now(), timers: h.clock.pendingTimers };
  }
}

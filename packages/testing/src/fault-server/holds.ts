/**
 * The fault server's side of the autojump protocol: hold the clock while doing real work, hold
 * nothing while deliberately waiting, and run scripted waits as the clock's own timers.
 *
 * A virtual clock jumps time only when the runtime is idle and no hold counts. The server holds
 * from the moment it has something to do until what it wrote has reached the client, so the
 * client sees every byte at the instant it was scripted; between those moments (a delay, a drip
 * gap, a hang) it holds nothing, so time jumps to the next timer at once.
 * @module
 */
import type { Clock } from "@keel/core";
import { hostSetImmediate } from "../host.js";

/**
 * Runs `fn` once the event loop has been through a poll phase: bytes written before the call are
 * then read by a client in this process (loopback delivers them to its socket synchronously), and
 * a reset sent after it cannot overtake them. One `setImmediate` is not enough when called from
 * the poll phase: its callback runs in the same loop turn, before the client's next poll.
 */
export function afterDelivery(fn: () => void): void {
  hostSetImmediate(() => hostSetImmediate(fn));
}

/**
 * One connection's real work and scripted waits, so that closing it (or the server) cancels every
 * timer and lets go of every hold at once.
 */
export interface Activity {
  /**
   * Holds the clock while real work is in flight; the returned `done` (idempotent) lets go of it
   * once what was written has been delivered ({@link afterDelivery}).
   */
  busy(what: string): () => void;
  /** Calls `fn` at `at` on the clock, unless the activity has been disposed by then. */
  schedule(at: number, fn: () => void): void;
  /** Cancels the pending timers and lets go of the holds (after delivery). Idempotent. */
  dispose(): void;
  readonly disposed: boolean;
}

/** Creates an {@link Activity} on `clock`; `label` prefixes hold descriptions in hang reports. */
export function createActivity(clock: Clock, label: string): Activity {
  const holds = new Set<() => void>();
  const timers = new Set<() => void>();
  let disposed = false;
  return {
    busy(what) {
      const release = clock.hold?.(`fault server: ${label}: ${what}`);
      if (!release) return () => {};
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        afterDelivery(() => {
          holds.delete(finish);
          release();
        });
      };
      holds.add(finish);
      return finish;
    },
    schedule(at, fn) {
      if (disposed) return;
      const cancel = clock.schedule(at, () => {
        timers.delete(cancel);
        if (!disposed) fn();
      });
      timers.add(cancel);
    },
    dispose() {
      if (disposed) return;
      disposed = true;
      for (const cancel of timers) cancel();
      timers.clear();
      for (const finish of [...holds]) finish();
    },
    get disposed() {
      return disposed;
    },
  };
}

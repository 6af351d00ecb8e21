/**
 * `ChangeSignal`: a wait for "something changed" (a job added, taken or ended; a delivery ended),
 * optionally bounded by an instant on the runtime's clock. The memory engine's `add` at capacity and
 * `idle`, and the worker's drain waits, each re-check their own condition after it wakes them.
 * `WakeQueue`: the takers' wait, woken one at a time.
 * @module
 */
import { action, type Clock, type Operation } from "@keel/core";

export class ChangeSignal {
  private readonly watchers = new Set<() => void>();

  constructor(private readonly clock: Clock) {}

  /** Waits for the next `notify`, or until `at` passes. */
  wait(description: string, at = Infinity): Operation<void> {
    return action<void>((resolve) => {
      const wake = () => resolve();
      this.watchers.add(wake);
      const cancelTimer = at === Infinity ? null : this.clock.schedule(at, wake);
      return () => {
        this.watchers.delete(wake);
        cancelTimer?.();
      };
    }, description);
  }

  notify(): void {
    if (this.watchers.size === 0) return;
    const woken = [...this.watchers];
    this.watchers.clear();
    for (const wake of woken) wake();
  }
}

/**
 * `WakeQueue`: waiters woken one at a time, oldest first, for the takers of a queue. A job becoming
 * ready wakes one taker, not all of them (a worker's idle slots all wait here: waking every one
 * for each job would cost O(concurrency) per job).
 */
export class WakeQueue {
  private readonly waiters: (() => void)[] = [];

  wait(description: string): Operation<void> {
    return action<void>((resolve) => {
      this.waiters.push(resolve);
      return () => {
        const i = this.waiters.indexOf(resolve);
        if (i >= 0) this.waiters.splice(i, 1);
      };
    }, description);
  }

  wakeOne(): void {
    this.waiters.shift()?.();
  }

  wakeAll(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }
}

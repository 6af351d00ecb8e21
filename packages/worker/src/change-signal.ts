/**
 * `ChangeSignal`: a wait for "something changed" (a job added, taken or ended; a delivery ended),
 * optionally bounded by an instant on the runtime's clock. The memory engine's `take` and `add`, and
 * the worker's slot and drain waits, each re-check their own condition after it wakes them.
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

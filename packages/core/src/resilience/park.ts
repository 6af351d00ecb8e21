/**
 * `park`: the suspension behind every queue wait in this layer (semaphore, channel, rate limiter).
 * @module
 */
import type { Suspension } from "../kernel/operation.js";

/** A queue entry that can be woken. `wake` is set only while its task waits at the suspension. */
export interface Parked {
  wake: (() => void) | null;
}

/**
 * A suspension that completes once `isDone()` holds: at once if it already does, otherwise when the
 * queue calls `parked.wake()`. `leave(done)` runs exactly once when the task leaves, whether it was
 * woken or cancelled (`done` false), so the queue can drop or skip the entry. `description` is read
 * when the task tree is printed (`semaphore db: 3 waiting`).
 */
export function park(
  parked: Parked,
  isDone: () => boolean,
  leave: (done: boolean) => void,
  description: () => string,
): Suspension<void> {
  return {
    kind: "suspend",
    get description() {
      return description();
    },
    interruptible: "normal",
    enter(resolve) {
      if (isDone()) {
        leave(true);
        resolve({ ok: true, value: undefined });
        return undefined;
      }
      parked.wake = () => resolve({ ok: true, value: undefined });
      return () => {
        parked.wake = null;
        leave(isDone());
      };
    },
  };
}

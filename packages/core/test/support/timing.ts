/**
 * Doing things at exact virtual instants of a harness's clock: cancelling a task, running a callback.
 * @module
 */
import { sleep, type Task } from "@keel/core";
import type { Harness } from "@keel/testing";

/** Calls `task.cancel(message)` at virtual time `at`; resolves with the time its future settles. */
export function cancelAt(h: Harness, task: Task<unknown>, at: number, message?: string): Promise<number> {
  return new Promise((resolve) => {
    h.clock.schedule(at, () => {
      task.cancel(message).then(() => resolve(h.clock.now()));
    });
  });
}

/** Calls `task.cancel()` at virtual time `at`; resolves with when its future settled and the timers left then. */
export function cancelAtWithTimers(
  h: Harness,
  task: Task<unknown>,
  at: number,
): Promise<{ at: number; timers: number }> {
  return new Promise((resolve) => {
    h.clock.schedule(at, () => {
      task.cancel().then(() => resolve({ at: h.clock.now(), timers: h.clock.pendingTimers }));
    });
  });
}

/** A root task that cancels `task` at `at` and logs `<name>.cancel settled` when the future settles. */
export function cancellerAt(h: Harness, task: Task<unknown>, at: number): Task<void> {
  return h.run(function* canceller() {
    yield* sleep(at);
    yield* task.cancel();
    h.mark(`${task.name}.cancel settled`);
  });
}

/** Runs `fn` at virtual time `at` (a timer registered now, so it fires before later-registered ones). */
export function atTime(h: Harness, at: number, fn: () => void): void {
  h.clock.schedule(at, fn);
}

/**
 * Holding a virtual clock while effection works: effection's timers and I/O are real, outside the
 * Keel runtime, so a virtual clock must not jump time past them.
 * @module
 */
import type { Clock } from "../kernel/clock.js";

/** The key of every hold taken for effection work: `clock.idle("effection")` lets autojump move past it. */
export const EFFECTION_HOLD_KEY = "effection";

/** A hold on a clock that nested Keel code can pause. */
export interface ClockHold {
  /**
   * Lets go of the hold while nested Keel code runs on the same clock (that code is inside the
   * runtime: autojump must move time for its timers); returns the re-take, idempotent.
   */
  pause(): () => void;
  /** Lets go for good (idempotent). */
  release(): void;
}

/**
 * Holds `clock` (a no-op on a clock without `hold`, such as the real one) until released.
 *
 * Invariant: the clock is held exactly while the hold is not released and no pause is open.
 */
export function holdClock(clock: Clock, description: string): ClockHold {
  let releaseHold: (() => void) | null = null;
  let pauses = 0;
  let released = false;
  const take = () => {
    if (!released && pauses === 0 && !releaseHold && clock.hold)
      releaseHold = clock.hold(description, EFFECTION_HOLD_KEY);
  };
  const drop = () => {
    const r = releaseHold;
    releaseHold = null;
    r?.();
  };
  take();
  return {
    pause() {
      pauses++;
      drop();
      let open = true;
      return () => {
        if (!open) return;
        open = false;
        pauses--;
        take();
      };
    },
    release() {
      released = true;
      drop();
    },
  };
}

/**
 * The real clock: monotonic time and batched timers.
 * @module
 */
import type { Clock } from "../kernel/clock.js";

interface Timer {
  readonly at: number;
  readonly seq: number;
  fn: (() => void) | null;
}

/**
 * A clock on `performance.now()` (offset to the epoch, so instants read like `Date.now()` but never
 * step backwards). Timers live in one heap behind a single host timer, so every timer due at one
 * instant fires in registration order in one batch, before the task resumptions they cause, as on the
 * virtual clock.
 *
 * @example
 * ```ts
 * import { createRealClock, run, sleep } from "@keel/core";
 * const clock = createRealClock();
 * const cancel = clock.schedule(clock.now() + 60_000, () => console.log("never"));
 * cancel(); // it never fires, and never keeps the process alive
 * const started = clock.now();
 * await run(() => sleep(20), { clock });
 * console.log(clock.now() - started >= 20); // true
 * ```
 */
export function createRealClock(): Clock {
  const origin = performance.timeOrigin;
  const now = () => origin + performance.now();
  const heap: Timer[] = [];
  let seq = 0;
  /** Invariant: the number of timers in the heap that are neither fired nor cancelled. */
  let live = 0;
  let host: ReturnType<typeof setTimeout> | null = null;
  let hostAt = Infinity;

  const less = (a: Timer, b: Timer) => a.at < b.at || (a.at === b.at && a.seq < b.seq);
  const push = (t: Timer) => {
    heap.push(t);
    let i = heap.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!less(heap[i]!, heap[p]!)) break;
      [heap[i], heap[p]] = [heap[p]!, heap[i]!];
      i = p;
    }
  };
  const pop = (): Timer => {
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && less(heap[l]!, heap[m]!)) m = l;
        if (r < heap.length && less(heap[r]!, heap[m]!)) m = r;
        if (m === i) break;
        [heap[i], heap[m]] = [heap[m]!, heap[i]!];
        i = m;
      }
    }
    return top;
  };
  const arm = () => {
    while (heap.length > 0 && heap[0]!.fn === null) pop();
    const next = heap[0];
    if (!next) {
      if (host) clearTimeout(host);
      host = null;
      hostAt = Infinity;
      return;
    }
    if (host && hostAt <= next.at) return;
    if (host) clearTimeout(host);
    hostAt = next.at;
    host = setTimeout(fire, Math.max(0, Math.ceil(next.at - now())));
  };
  const fire = () => {
    host = null;
    hostAt = Infinity;
    const t = now();
    const due: Timer[] = [];
    while (heap.length > 0 && heap[0]!.at <= t) due.push(pop());
    for (const timer of due) {
      const fn = timer.fn;
      if (!fn) continue;
      timer.fn = null;
      live--;
      fn();
    }
    arm();
  };

  return {
    now,
    schedule(at, fn) {
      const timer: Timer = { at, seq: seq++, fn };
      push(timer);
      arm();
      live++;
      return () => {
        if (timer.fn === null) return;
        timer.fn = null;
        // A host timer armed for a cancelled one fires early and re-arms, which is harmless; only
        // when no live timer is left must it go, so that it never keeps the process alive.
        if (--live === 0) arm();
      };
    },
  };
}

/**
 * The process-wide real clock that `run` uses when no clock is given.
 *
 * @example
 * ```ts
 * import { now, realClock, run } from "@keel/core";
 * const t = await run(now); // without { clock }, a tree runs on realClock
 * console.log(Math.abs(t - realClock.now()) < 1000, Math.abs(t - Date.now()) < 1000); // true true
 * ```
 */
export const realClock: Clock = createRealClock();

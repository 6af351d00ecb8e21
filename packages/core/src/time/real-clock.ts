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
 */
export function createRealClock(): Clock {
  const origin = performance.timeOrigin;
  const now = () => origin + performance.now();
  const heap: Timer[] = [];
  let seq = 0;
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
    if (host && hostAt === next.at) return;
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
      timer.fn = null;
      fn?.();
    }
    arm();
  };

  return {
    now,
    schedule(at, fn) {
      const timer: Timer = { at, seq: seq++, fn };
      push(timer);
      arm();
      return () => {
        timer.fn = null;
        // Re-arm, so a cancelled timer never keeps the host timer (and the process) alive.
        arm();
      };
    },
  };
}

/** The process-wide real clock that `run` uses when no clock is given. */
export const realClock: Clock = createRealClock();

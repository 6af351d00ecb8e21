/**
 * The real clock: monotonic time and batched timers.
 * @module
 */
import { type Clock, COARSE_NOW, type StampableClock } from "../kernel/clock.js";
import { hostPerformance, hostTimers } from "../kernel/host.js";

/** The longest delay a host timer takes (2^31 - 1 ms, about 24.8 days); longer ones fire at once. */
const MAX_HOST_DELAY_MS = 2 ** 31 - 1;

interface Timer {
  readonly at: number;
  readonly seq: number;
  fn: (() => void) | null;
  /** Its slot in `heap`; -1 once out of it (due, fired or cancelled). */
  index: number;
}

/** Idle ticks (about 1 ms each) after which the coarse reading's interval stops. */
const IDLE_TICKS = 200;

/**
 * A clock on `performance.now()` (offset to the epoch, so instants read like `Date.now()` but never
 * step backwards). Timers live in one heap behind a single host timer, so every timer due at one
 * instant fires in registration order in one batch, before the task resumptions they cause, as on the
 * virtual clock. A timer further away than a host timer can wait (2^31 - 1 ms, about 24.8 days) is
 * reached by re-arming at that limit, quietly.
 *
 * The task tree's stamps (when a task started, when a wait began) use a coarser reading: one host
 * read serves them all until an unref'd 1 ms interval ticks or a batch of timers fires, and that
 * interval runs only while stamps are asked for. A stamp can lag the host clock by up to a
 * millisecond plus the synchronous stretch it is taken in (the interval ticks only in the event
 * loop's timers phase); a stamp taken after a timer's wake-up is never before that timer's instant.
 * Deadlines, timers and `now()` always read the host clock.
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
  // The host's, kept at load (kernel/host.ts): fake timers installed later must not stop this clock.
  const origin = hostPerformance.timeOrigin;
  const now = () => origin + hostPerformance.now();
  /**
   * Invariant: exactly the timers neither fired nor cancelled nor taken for a batch, each at its
   * `index`, in heap order by (`at`, `seq`).
   */
  const heap: Timer[] = [];
  let seq = 0;
  /** Invariant: the number of timers neither fired nor cancelled (in the heap, or taken for a batch). */
  let live = 0;
  let host: ReturnType<typeof setTimeout> | null = null;
  let immediate: ReturnType<typeof setImmediate> | null = null;
  let hostAt = Infinity;
  /** Invariant: true when the armed host timer (if any) is ref'd. */
  let held = false;

  // The coarse reading for stamps (COARSE_NOW): one host read serves every stamp until the next
  // tick of an unref'd 1 ms interval, which runs only while stamps are being asked for: it stops
  // after `IDLE_TICKS` ticks in a row found none asked. Why not at the first: a program that works
  // in bursts would make a new interval per burst, and V8 throws away the optimized code of every
  // kernel function that inlined the start of the last one when that interval's timer list is
  // collected (measured: the kernel reached its optimized speed two bursts later than it does now).
  // Invariant: `coarseFresh` is true only if `coarse` was read after the last tick and after the last
  // timer batch fired.
  let coarse = 0;
  let coarseFresh = false;
  let askedSinceTick = false;
  let idleTicks = 0;
  let ticker: ReturnType<typeof setInterval> | null = null;
  const tick = () => {
    coarseFresh = false;
    if (askedSinceTick) idleTicks = 0;
    else if (++idleTicks >= IDLE_TICKS && ticker !== null) {
      hostTimers.clearInterval(ticker);
      ticker = null;
    }
    askedSinceTick = false;
  };
  const coarseNow = (): number => {
    askedSinceTick = true;
    if (coarseFresh) return coarse;
    coarse = now();
    coarseFresh = true;
    if (ticker === null) {
      idleTicks = 0;
      ticker = hostTimers.setInterval(tick, 1);
      ticker.unref();
    }
    return coarse;
  };

  const less = (a: Timer, b: Timer) => a.at < b.at || (a.at === b.at && a.seq < b.seq);
  const place = (t: Timer, i: number) => {
    heap[i] = t;
    t.index = i;
  };
  const siftUp = (t: Timer, i: number) => {
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = heap[p]!;
      if (!less(t, parent)) break;
      place(parent, i);
      i = p;
    }
    place(t, i);
  };
  const siftDown = (t: Timer, i: number) => {
    const n = heap.length;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && less(heap[r]!, heap[l]!) ? r : l;
      const child = heap[c]!;
      if (!less(child, t)) break;
      place(child, i);
      i = c;
    }
    place(t, i);
  };
  const push = (t: Timer) => {
    heap.push(t);
    siftUp(t, heap.length - 1);
  };
  /** Takes `t` out of the heap, wherever it is. */
  const remove = (t: Timer) => {
    const i = t.index;
    t.index = -1;
    const last = heap.pop()!;
    if (last === t) return;
    if (i > 0 && less(last, heap[(i - 1) >> 1]!)) siftUp(last, i);
    else siftDown(last, i);
  };
  const arm = () => {
    const next = heap[0];
    if (!next) {
      clearHost();
      hostAt = Infinity;
      return;
    }
    if ((host || immediate) && hostAt <= next.at) {
      hold(live > 0);
      return;
    }
    clearHost();
    const t = now();
    const delay = next.at - t;
    // A timer already due fires on the next turn: setTimeout would clamp 0 to 1 ms, which makes
    // every `sleep(0)` (a zero backoff, say) cost a millisecond.
    if (delay <= 0) {
      hostAt = next.at;
      immediate = hostTimers.setImmediate(fire);
    } else if (delay > MAX_HOST_DELAY_MS) {
      // The host would fire after 1 ms (with a TimeoutOverflowWarning) and re-arm forever; wake at
      // the host's limit instead, find nothing due, and re-arm from there until the timer is due.
      hostAt = t + MAX_HOST_DELAY_MS;
      host = hostTimers.setTimeout(fire, MAX_HOST_DELAY_MS);
    } else {
      hostAt = next.at;
      host = hostTimers.setTimeout(fire, Math.ceil(delay));
    }
    held = true;
    hold(live > 0);
  };
  /**
   * Whether the host timer keeps the process alive: only while a live timer waits. With none left
   * it stays armed but unref'd, rather than cleared: a client that arms and cancels a timeout per
   * request would otherwise pay a setTimeout and a clearTimeout for every one.
   */
  const hold = (on: boolean) => {
    if (on === held) return;
    held = on;
    if (on) {
      host?.ref();
      immediate?.ref();
    } else {
      host?.unref();
      immediate?.unref();
    }
  };
  const clearHost = () => {
    if (host) hostTimers.clearTimeout(host);
    if (immediate) hostTimers.clearImmediate(immediate);
    host = null;
    immediate = null;
  };
  const fire = () => {
    host = null;
    immediate = null;
    hostAt = Infinity;
    const t = now();
    // A batch can fire before the interval has ticked once (a timer already due at arming fires from
    // setImmediate, ahead of the event loop's timers phase): reading again here keeps every stamp a
    // timer's wake-up leads to at or after that timer's instant.
    coarseFresh = false;
    const due: Timer[] = [];
    while (heap.length > 0 && heap[0]!.at <= t) {
      const timer = heap[0]!;
      remove(timer);
      due.push(timer);
    }
    for (const timer of due) {
      const fn = timer.fn;
      if (!fn) continue;
      timer.fn = null;
      live--;
      fn();
    }
    arm();
  };

  const clock: StampableClock = {
    [COARSE_NOW]: coarseNow,
    now,
    schedule(at, fn) {
      const timer: Timer = { at, seq: seq++, fn, index: -1 };
      push(timer);
      live++;
      arm();
      return () => {
        if (timer.fn === null) return;
        timer.fn = null;
        // Out of the heap at once rather than when it reaches the top: a client that cancels a 30 s
        // timeout per request would otherwise keep about a thousand dead timers alive across
        // scavenges (measured with them: ~0.9 KB more per job promoted to the old generation).
        if (timer.index >= 0) remove(timer);
        // A host timer armed for a cancelled one fires early and re-arms, which is harmless; only
        // when no live timer is left must it stop keeping the process alive.
        if (--live === 0) hold(false);
      };
    },
  };
  return clock;
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

/**
 * A virtual clock: time moves only when told to, or (autojump) when the runtime is idle.
 * @module
 */
import type { Clock } from "@keel/core";
import { hostSetImmediate } from "./host.js";

/**
 * A {@link Clock} whose time is controlled by the test.
 *
 * @example
 * ```ts
 * import { run, sleep } from "@keel/core";
 * import { createVirtualClock, type VirtualClock } from "@keel/testing";
 * const clock: VirtualClock = createVirtualClock({ autojump: false }); // time moves only when told
 * const woke: number[] = [];
 * const task = run(function* () {
 *   yield* sleep(100);
 *   woke.push(clock.now());
 *   yield* sleep(100);
 *   woke.push(clock.now());
 * }, { clock });
 * await new Promise((resolve) => setImmediate(resolve));
 * console.log(clock.pendingTimerInstants); // [100]
 * clock.advance(100);
 * await new Promise((resolve) => setImmediate(resolve));
 * console.log(woke, clock.pendingTimerInstants); // [100] [200]
 * clock.autojump = true; // from now on, idle time jumps to the next timer
 * await task;
 * console.log(woke, clock.now()); // [100, 200] 200
 * ```
 */
export interface VirtualClock extends Clock {
  /**
   * Moves time forward by `ms`, firing every timer due on the way in order (each sees `now()` equal
   * to its own instant). Synchronous: called inside a task it stands for `ms` of blocking work.
   */
  advance(ms: number): void;
  /** Timers registered and neither fired nor cancelled. */
  readonly pendingTimers: number;
  /** The instants of the pending timers, earliest first (for assertions and hang reports). */
  readonly pendingTimerInstants: readonly number[];
  /** Holds that keep time from jumping now (see {@link Clock.hold}), not counting idle keys. */
  readonly holds: number;
  /** Descriptions of the holds that count now, for hang reports. */
  readonly holdDescriptions: readonly string[];
  /** Whether time jumps to the next timer when the runtime is idle. */
  autojump: boolean;
  /**
   * Keeps autojump from moving time while something outside the runtime is in flight; returns the
   * release (idempotent). A hold with a `key` (an origin such as `127.0.0.1:8080`) does not count
   * while that key is declared idle.
   */
  hold(description: string, key?: string): () => void;
  /**
   * Declares `key` idle until the returned function is called: its holds stop counting. A test
   * server that deliberately never answers (a connect that hangs) declares its origin idle, so that
   * autojump still moves time while a client waits on it.
   */
  idle(key: string): () => void;
}

/**
 * Autojumps in a row that found a timer already due (time could not move) before the clock treats
 * the program as busy and moves on to its next later timer: a loop of `sleep(0)` never goes idle,
 * yet on a real clock each turn takes time and later timers (a cleanup budget's cut) come due.
 */
const STALL_LIMIT = 1000;

interface Timer {
  readonly at: number;
  readonly seq: number;
  readonly fn: () => void;
}

/**
 * Creates a virtual clock starting at `start` (default 0).
 *
 * With `autojump` (on by default), when every task is suspended and nothing held is in flight, time
 * jumps to the next timer: the check runs on `setImmediate`, after the runtime's queue and every
 * pending promise callback have drained, so a test never sleeps for real. It is the host's own
 * `setImmediate`, kept from module load, so autojump works under `vi.useFakeTimers()` too. Timers
 * due at one instant fire in registration order, all before any task they wake resumes. A program
 * that never goes idle with time moving (a loop of `sleep(0)` that swallows its cancellation) is
 * treated as busy: after 1000 jumps in a row that only fired timers already due, time moves on to
 * the next later timer, so a cleanup budget's cut comes as it would on a real clock.
 *
 * @example
 * ```ts
 * import { run, sleep, now } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const clock = createVirtualClock();
 * const t = await run(function* () { yield* sleep(60_000); return yield* now(); }, { clock });
 * console.log(t); // 60000, in about a millisecond of real time
 * ```
 * @throws `RangeError` for a non-finite `start`.
 */
export function createVirtualClock(options: { start?: number; autojump?: boolean } = {}): VirtualClock {
  const start = options.start ?? 0;
  if (typeof start !== "number" || !Number.isFinite(start)) {
    throw new RangeError(`createVirtualClock({ start }): expected a finite number, got ${String(start)}`);
  }
  let current = start;
  let seq = 0;
  const holdSet = new Set<{ description: string; key: string | undefined }>();
  const idleKeys = new Map<string, number>();
  const counting = () => [...holdSet].filter((h) => h.key === undefined || !idleKeys.has(h.key));
  let armed = false;
  let stalls = 0;
  let autojump = options.autojump ?? true;
  const timers: Timer[] = [];

  const insert = (t: Timer) => {
    let lo = 0;
    let hi = timers.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const m = timers[mid]!;
      if (m.at < t.at || (m.at === t.at && m.seq < t.seq)) lo = mid + 1;
      else hi = mid;
    }
    timers.splice(lo, 0, t);
  };

  const fireUntil = (target: number) => {
    while (timers.length > 0 && timers[0]!.at <= target) {
      const t = timers.shift()!;
      if (t.at > current) current = t.at;
      t.fn();
    }
    if (target > current) current = target;
  };

  const arm = () => {
    if (armed || !autojump || timers.length === 0) return;
    armed = true;
    hostSetImmediate(() => {
      armed = false;
      if (!autojump || timers.length === 0 || counting().length > 0) return;
      let target = Math.max(timers[0]!.at, current);
      if (target > current) stalls = 0;
      else if (++stalls >= STALL_LIMIT) {
        // Busy at one instant for too long: let time pass to the next later timer, as it would.
        stalls = 0;
        const later = timers.find((t) => t.at > current);
        if (later) target = later.at;
      }
      fireUntil(target);
      arm();
    });
  };

  return {
    now: () => current,
    schedule(at, fn) {
      const t: Timer = { at, seq: seq++, fn };
      insert(t);
      arm();
      return () => {
        const i = timers.indexOf(t);
        if (i >= 0) timers.splice(i, 1);
      };
    },
    hold(description, key) {
      const h = { description, key };
      holdSet.add(h);
      return () => {
        if (holdSet.delete(h)) arm();
      };
    },
    idle(key) {
      idleKeys.set(key, (idleKeys.get(key) ?? 0) + 1);
      arm();
      let done = false;
      return () => {
        if (done) return;
        done = true;
        const n = (idleKeys.get(key) ?? 1) - 1;
        if (n <= 0) idleKeys.delete(key);
        else idleKeys.set(key, n);
      };
    },
    advance(ms) {
      if (typeof ms !== "number" || Number.isNaN(ms) || ms < 0 || ms === Infinity) {
        throw new RangeError(`clock.advance(ms): expected a finite number ≥ 0, got ${String(ms)}`);
      }
      if (ms > 0) stalls = 0;
      fireUntil(current + ms);
      arm();
    },
    get pendingTimers() {
      return timers.length;
    },
    get pendingTimerInstants() {
      return timers.map((t) => t.at);
    },
    get holds() {
      return counting().length;
    },
    get holdDescriptions() {
      return counting().map((h) => h.description);
    },
    get autojump() {
      return autojump;
    },
    set autojump(on: boolean) {
      autojump = on;
      arm();
    },
  };
}

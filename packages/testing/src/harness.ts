/**
 * A test harness: a virtual clock, a timestamped log, the event stream, and the leak check.
 * @module
 */
import { type KeelEvent, type KeelEventType, type Op, type RunOptions, run, type Task } from "@keel/core";
import { nextHostTurn } from "./host.js";
import { createVirtualClock, type VirtualClock } from "./virtual-clock.js";

/**
 * What {@link createHarness} returns.
 *
 * @example
 * ```ts
 * import { sleep, timeout } from "@keel/core";
 * import { createHarness, type Harness } from "@keel/testing";
 * function* slowStep(h: Harness) { yield* sleep(250); h.mark("step done"); }
 * const h: Harness = createHarness();
 * await h.run(function* () {
 *   try { yield* timeout(100, () => slowStep(h)); } catch { h.mark("timed out"); }
 * });
 * console.log(h.log, h.eventsOf("timeout:fire").length, h.liveTasks); // ["timed out@100"] 1 0
 * await h.expectClean(); // throws if a task is still live or a timer pending
 * ```
 */
export interface Harness {
  readonly clock: VirtualClock;
  /** Entries written by {@link Harness.mark}, as `text@time`. */
  readonly log: string[];
  /** Every event of every task run through this harness, in order. */
  readonly events: KeelEvent[];
  /** Appends `text@now` to the log. */
  mark(text: string): void;
  /** The events of one type. */
  eventsOf<T extends KeelEventType>(type: T): Extract<KeelEvent, { type: T }>[];
  /** Tasks started and not yet settled, across every run of this harness. */
  readonly liveTasks: number;
  /** Runs `op` on the harness clock, recording events (other options pass through). */
  run<T>(op: Op<T>, options?: Omit<RunOptions, "clock" | "onEvent">): Task<T>;
  /**
   * The leak check every test ends with: throws unless no task is live and no timer is pending.
   * Lets the runtime drain first, so a task settling in the current turn is not counted.
   */
  expectClean(): Promise<void>;
}

/**
 * Creates a harness on a fresh virtual clock (autojump on unless told otherwise).
 *
 * @example
 * ```ts
 * import { sleep } from "@keel/core";
 * import { createHarness } from "@keel/testing";
 * const h = createHarness();
 * await h.run(function* () { yield* sleep(100); h.mark("woke"); });
 * console.log(h.log); // ["woke@100"]
 * await h.expectClean();
 * ```
 */
export function createHarness(options: { start?: number; autojump?: boolean } = {}): Harness {
  const clock = createVirtualClock(options);
  const log: string[] = [];
  const events: KeelEvent[] = [];
  const live = new Set<number>();
  const onEvent = (e: KeelEvent) => {
    events.push(e);
    if (e.type === "task:start") live.add(e.taskId);
    else if (e.type === "task:settle") live.delete(e.taskId);
  };
  return {
    clock,
    log,
    events,
    mark: (text) => {
      log.push(`${text}@${clock.now()}`);
    },
    eventsOf: <T extends KeelEventType>(type: T) =>
      events.filter((e) => e.type === type) as Extract<KeelEvent, { type: T }>[],
    get liveTasks() {
      return live.size;
    },
    run: (op, runOptions) => run(op, { ...runOptions, clock, onEvent }),
    async expectClean() {
      await nextHostTurn();
      const problems: string[] = [];
      if (live.size > 0) problems.push(`${live.size} live task(s): ids ${[...live].join(", ")}`);
      if (clock.pendingTimers > 0)
        problems.push(`${clock.pendingTimers} pending timer(s) at ${clock.pendingTimerInstants.join(", ")}`);
      if (problems.length > 0) throw new Error(`leak check failed: ${problems.join("; ")}`);
    },
  };
}

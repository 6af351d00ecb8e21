/**
 * A live snapshot of the task tree, and its text form.
 * @module
 */
import { invalidType } from "../errors.js";
import type { CancelReason } from "../kernel/cancelled.js";
import type { WaitDetail } from "../kernel/operation.js";
import { type Task, TaskImpl, type TaskState } from "../kernel/task.js";

/**
 * One task as seen at the moment of the snapshot.
 *
 * @example
 * ```ts
 * import { run, sleep, snapshot, spawn, suspend, type TaskSnapshot } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const clock = createVirtualClock({ autojump: false });
 * const root = run(function* server() {
 *   yield* spawn(function* poll() { yield* sleep(1000); });
 *   yield* suspend();
 * }, { clock });
 * await new Promise((resolve) => setImmediate(resolve));
 * clock.advance(250);
 * const s: TaskSnapshot = snapshot(root);
 * console.log(s.name, s.state, s.ageMs, s.waitingOn); // server running 250 suspend()
 * // ["poll waits on sleep(1000) for 250 ms"]
 * console.log(s.children.map((c) => `${c.name} waits on ${c.waitingOn} for ${c.waitingForMs} ms`));
 * await root.cancel();
 * ```
 */
export interface TaskSnapshot {
  readonly id: number;
  readonly name: string;
  readonly path: string;
  readonly state: TaskState;
  /** The clock's time when the snapshot was taken (a sleep's `until` compares with it). */
  readonly at: number;
  /**
   * Time since the task started, on its clock. On the real clock this and `waitingForMs` come from a
   * reading refreshed every millisecond (a host clock read per spawn and per wait would cost more
   * than either), so they can be short by about a millisecond, or by the length of a synchronous
   * step that ran before the task was spawned or began to wait.
   */
  readonly ageMs: number;
  /** What is left of its effective deadline (`Infinity` when none). */
  readonly deadlineLeftMs: number;
  /** What it waits on now (`sleep(250)`), with how long it has waited; null while it runs. */
  readonly waitingOn: string | null;
  readonly waitingForMs: number | null;
  /**
   * The wait as data, where the wait tells it (a sleep's wake time, a semaphore's queue position, an
   * HTTP request's method, path and phase, the task joined); null otherwise.
   */
  readonly waitDetail: WaitDetail | null;
  /**
   * Set while a delivered cancellation unwinds the task: since when (`forMs`), why, and how long
   * before its cleanup budget cuts it (`cutInMs`).
   */
  readonly unwinding: {
    readonly forMs: number;
    readonly reason: CancelReason;
    readonly cutInMs: number;
  } | null;
  /** Cancellation requests in flight against it. */
  readonly cancellationCount: number;
  readonly children: readonly TaskSnapshot[];
}

/**
 * Takes a snapshot of `task` and everything under it.
 *
 * @example
 * ```ts
 * import { formatTaskTree, run, sleep, snapshot, spawn, suspend } from "@keel/core";
 * const root = run(function* server() { yield* spawn(function* poll() { yield* sleep(1000); }); yield* suspend(); });
 * await new Promise((r) => setTimeout(r, 5));
 * console.log(formatTaskTree(snapshot(root)));
 * await root.cancel();
 * ```
 */
export function snapshot(task: Task<unknown>): TaskSnapshot {
  if (!(task instanceof TaskImpl)) throw invalidType("snapshot(task)", "a Keel task", task);
  const t = task;
  const at = t.clock.now();
  const w = t.isSettled ? null : t.waitingOn;
  const u = t.unwindingSince;
  return {
    id: t.id,
    name: t.name,
    path: t.path,
    state: t.state,
    at,
    ageMs: at - t.startedAt,
    deadlineLeftMs: t.isSettled ? Infinity : Math.max(0, t.effectiveDeadline() - at),
    waitingOn:
      w?.description ??
      (t.isSettled ? null : t.liveChildren().length > 0 && !t.waitingOn ? "its children" : null),
    waitingForMs: w ? at - w.since : null,
    waitDetail: w?.suspension.waitDetail?.() ?? null,
    unwinding: u
      ? { forMs: at - u.at, reason: u.reason, cutInMs: Math.max(0, u.cleanupDeadline - at) }
      : null,
    cancellationCount: t.cancellationCount,
    children: t.liveChildren().map((c) => snapshot(c)),
  };
}

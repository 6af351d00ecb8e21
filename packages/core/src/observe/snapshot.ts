/**
 * A live snapshot of the task tree, and its text form.
 * @module
 */
import { invalidType } from "../errors.js";
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
  return {
    id: t.id,
    name: t.name,
    path: t.path,
    state: t.state,
    ageMs: at - t.startedAt,
    deadlineLeftMs: t.isSettled ? Infinity : Math.max(0, t.effectiveDeadline() - at),
    waitingOn:
      w?.description ??
      (t.isSettled ? null : t.liveChildren().length > 0 && !t.waitingOn ? "its children" : null),
    waitingForMs: w ? at - w.since : null,
    cancellationCount: t.cancellationCount,
    children: t.liveChildren().map((c) => snapshot(c)),
  };
}

/**
 * Formats a snapshot as an indented tree, one task a line:
 * `server#1 running 2.0s, waiting on suspend()` …
 *
 * @example
 * ```ts
 * import { formatTaskTree, run, sleep, snapshot, spawn, suspend } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const clock = createVirtualClock({ autojump: false });
 * const root = run(function* server() {
 *   yield* spawn(function* poll() { yield* sleep(5000); });
 *   yield* suspend();
 * }, { clock });
 * await new Promise((resolve) => setImmediate(resolve));
 * clock.advance(1500);
 * console.log(formatTaskTree(snapshot(root)));
 * // server#… running 1.5s, waiting on suspend() for 1.5s
 * //   poll#… running 1.5s, waiting on sleep(5000) for 1.5s
 * await root.cancel();
 * ```
 */
export function formatTaskTree(s: TaskSnapshot, indent = ""): string {
  if (typeof s !== "object" || s === null || !Array.isArray(s.children))
    throw invalidType("formatTaskTree(snapshot)", "a TaskSnapshot (from snapshot(task))", s);
  if (typeof indent !== "string") throw invalidType("formatTaskTree(snapshot, indent)", "a string", indent);
  const parts = [`${indent}${s.name}#${s.id} ${s.state} ${formatMs(s.ageMs)}`];
  if (s.deadlineLeftMs !== Infinity) parts.push(`deadline in ${formatMs(s.deadlineLeftMs)}`);
  if (s.waitingOn)
    parts.push(
      `waiting on ${s.waitingOn}${s.waitingForMs !== null ? ` for ${formatMs(s.waitingForMs)}` : ""}`,
    );
  if (s.cancellationCount > 0) parts.push(`${s.cancellationCount} cancellation request(s)`);
  const line = parts.join(", ");
  return [line, ...s.children.map((c) => formatTaskTree(c, `${indent}  `))].join("\n");
}

function formatMs(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)}s` : `${Math.round(ms)}ms`;
}

/**
 * The text form of a task-tree snapshot: what an operator reads to find why a process is stuck.
 * @module
 */
import { invalidType } from "../errors.js";
import type { WaitDetail } from "../kernel/operation.js";
import type { TaskSnapshot } from "./snapshot.js";

/**
 * Formats a snapshot as an indented tree, one task a line: its state and age, the deadline left,
 * what it waits on and for how long (with what the wait tells: when a sleep wakes, a semaphore
 * waiter's place in the queue), and, for a task cancelled but still unwinding, since when, why and
 * when its cleanup budget cuts it.
 *
 * `server#1 running 2.0s, waiting on suspend() for 2.0s`
 * `  fetch#4 cancelling 2.0s, waiting on GET /orders: waiting for headers for 1.2s, unwinding for 300ms (shutdown: received SIGTERM), cut in 4.7s`
 *
 * @example
 * ```ts
 * import { createSemaphore, formatTaskTree, run, sleep, snapshot, spawn, suspend } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const clock = createVirtualClock({ autojump: false });
 * const db = createSemaphore(1, { name: "db" });
 * const root = run(function* server() {
 *   yield* spawn(function* holder() { yield* db.use(() => sleep(5000)); });
 *   yield* spawn(function* query() { yield* db.use(() => sleep(10)); });
 *   yield* suspend();
 * }, { clock });
 * await new Promise((resolve) => setImmediate(resolve));
 * clock.advance(1500);
 * console.log(formatTaskTree(snapshot(root)));
 * // server#… running 1.5s, waiting on suspend() for 1.5s
 * //   holder#… running 1.5s, waiting on sleep(5000) for 1.5s, wakes in 3.5s
 * //   query#… running 1.5s, waiting on semaphore db: 1 waiting for 1.5s, 1st in the queue
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
  const detail = s.waitDetail ? formatDetail(s.waitDetail, s.at) : null;
  if (detail) parts.push(detail);
  if (s.unwinding) {
    const { forMs, reason, cutInMs } = s.unwinding;
    const why = reason.message ? `${reason.kind}: ${reason.message}` : reason.kind;
    parts.push(`unwinding for ${formatMs(forMs)} (${why}), cut in ${formatMs(cutInMs)}`);
  } else if (s.cancellationCount > 0) parts.push(`${s.cancellationCount} cancellation request(s)`);
  const line = parts.join(", ");
  return [line, ...s.children.map((c) => formatTaskTree(c, `${indent}  `))].join("\n");
}

/** What the description does not already say (an HTTP wait's and a join's say it all). */
function formatDetail(d: WaitDetail, at: number): string | null {
  switch (d.kind) {
    case "sleep":
      return d.until === Infinity ? null : `wakes in ${formatMs(Math.max(0, d.until - at))}`;
    case "semaphore":
      return `${ordinal(d.position)} in the queue`;
    default:
      return null;
  }
}

function ordinal(n: number): string {
  const tens = n % 100;
  if (tens >= 11 && tens <= 13) return `${n}th`;
  return `${n}${["th", "st", "nd", "rd"][n % 10] ?? "th"}`;
}

function formatMs(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)}s` : `${Math.round(ms)}ms`;
}

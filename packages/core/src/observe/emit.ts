/**
 * `emitEvent`: how packages built on Keel report into the runtime's event stream.
 * @module
 */
import { invalidRange } from "../errors.js";
import { currentTask } from "../kernel/current.js";
import { warnNoDeadline } from "../kernel/deadline-missing.js";
import type { Operation } from "../kernel/operation.js";
import { runningTask, type TaskImpl } from "../kernel/task.js";
import type { KeelEventInput } from "./events.js";

/** Event families a package may emit; the kernel's own (`task:`, `cancel:`, …) stay the kernel's. */
const PACKAGE_FAMILIES = ["worker:", "workflow:"] as const;

/**
 * The events a package may emit: those of the table whose family belongs to a package (`worker:`,
 * `workflow:`).
 *
 * @example
 * ```ts
 * import type { PackageEventInput } from "@keel/core";
 * const e: PackageEventInput = { type: "worker:job", queue: "mail", jobId: "m1", attempt: 1, transition: "start" };
 * console.log(e.type); // worker:job
 * ```
 */
export type PackageEventInput = Extract<
  KeelEventInput,
  { type: `worker:${string}` | `workflow:${string}` | "deadline:missing" }
>;

/**
 * Emits `event` into the current runtime's event stream, stamped like the runtime's own (`at` from
 * its clock, the current task's id and path). Nothing is built or delivered when nobody listens.
 *
 * @example
 * ```ts
 * import { emitEvent, type KeelEvent, run } from "@keel/core";
 * const seen: KeelEvent[] = [];
 * await run(function* () {
 *   yield* emitEvent({ type: "worker:job", queue: "mail", jobId: "m1", attempt: 1, transition: "start" });
 * }, { onEvent: (e) => seen.push(e) });
 * console.log(seen.filter((e) => e.type === "worker:job").length); // 1
 * ```
 * A `deadline:missing` event is the `warnNoDeadline` warning of an external call a package makes
 * with no deadline of its caller's (a job added without one): emitted only when the run asked for it.
 *
 * @throws `RangeError` for an event whose `type` is not a package family's (`worker:`) nor
 * `deadline:missing`.
 */
export function emitEvent(event: PackageEventInput): Operation<void> {
  const type = (event as { type?: unknown } | null)?.type;
  if (type !== "deadline:missing" && (typeof type !== "string" || !isPackageFamily(type)))
    throw invalidRange(
      "emitEvent(event)",
      `an event of a package family (${PACKAGE_FAMILIES.join(", ")})`,
      type,
    );
  return new EmitOperation(event);
}

function isPackageFamily(type: string): boolean {
  for (let i = 0; i < PACKAGE_FAMILIES.length; i++) if (type.startsWith(PACKAGE_FAMILIES[i]!)) return true;
  return false;
}

/**
 * Whether the current run delivers its events to anyone: an `onEvent` given to `run` or `main`, or a
 * subscriber on one of the `KEEL_CHANNELS`. A package that emits on a hot path (a worker, one
 * event per job transition) asks once and builds no event nobody receives. Answered within the step,
 * with no allocation; outside a task's step (an operation driven by hand) it asks the driver.
 *
 * Warnings (`deadline:missing` and the runtime's own) reach `onWarning` even when this is false: emit
 * them with {@link emitEvent} regardless.
 *
 * @example
 * ```ts
 * import { emitEvent, eventsWanted, run } from "@keel/core";
 * const seen: string[] = [];
 * const wanted = await run(function* () {
 *   if (yield* eventsWanted())
 *     yield* emitEvent({ type: "worker:job", queue: "mail", jobId: "m1", attempt: 1, transition: "start" });
 *   return yield* eventsWanted();
 * }, { onEvent: (e) => seen.push(e.type) });
 * console.log(wanted, seen.includes("worker:job")); // true true
 * console.log(await run(eventsWanted)); // false
 * ```
 */
export function eventsWanted(): Operation<boolean> {
  return EVENTS_WANTED;
}

const EVENTS_WANTED: Operation<boolean> = {
  [Symbol.iterator](): Iterator<unknown, boolean, unknown> {
    const task = runningTask();
    if (!task) return askWanted();
    return task.runtime.listening ? WANTED : NOT_WANTED;
  },
};

/** Shared finished iterators: `yield*` reads the answer from their first step. */
const WANTED: Iterator<unknown, boolean, unknown> = { next: () => ({ done: true, value: true }) };
const NOT_WANTED: Iterator<unknown, boolean, unknown> = { next: () => ({ done: true, value: false }) };

function* askWanted(): Generator<unknown, boolean, unknown> {
  return (yield* currentTask("eventsWanted()")).runtime.listening;
}

/**
 * Called for every transition of every job: inside a task's step (nearly always) the event is
 * emitted as the operation is entered, with no generator at all (a literal
 * `{ *[Symbol.iterator]() {…} }` would make a generator function per call, see kernel/bound-op.ts).
 */
class EmitOperation implements Operation<void> {
  constructor(private readonly event: PackageEventInput) {}
  [Symbol.iterator](): Iterator<unknown, void, unknown> {
    const task = runningTask();
    if (!task) return emitFromAsk(this.event);
    emitIn(task, this.event);
    return DONE;
  }
}

const DONE: Iterator<unknown, void, unknown> = {
  next: () => ({ done: true, value: undefined }),
};

function emitIn(task: TaskImpl<unknown>, event: PackageEventInput): void {
  if (event.type === "deadline:missing") warnNoDeadline(task, event.call, event.label);
  // A copy: `task.emit` completes the object it is given, and this one is the caller's.
  else task.emit({ ...event } as KeelEventInput);
}

/** Outside a step (an operation driven by hand): asks the driver for the task, as `currentTask` does. */
function* emitFromAsk(event: PackageEventInput): Generator<unknown, void, unknown> {
  emitIn(yield* currentTask("emitEvent(event)"), event);
}

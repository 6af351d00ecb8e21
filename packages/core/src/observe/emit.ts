/**
 * `emitEvent`: how packages built on Keel report into the runtime's event stream.
 * @module
 */
import { invalidRange } from "../errors.js";
import { BoundOp1 } from "../kernel/bound-op.js";
import { currentTask } from "../kernel/current.js";
import { warnNoDeadline } from "../kernel/deadline-missing.js";
import type { Operation } from "../kernel/operation.js";
import type { KeelEventInput } from "./events.js";

/** Event families a package may emit; the kernel's own (`task:`, `cancel:`, …) stay the kernel's. */
const PACKAGE_FAMILIES = ["worker:"] as const;

/**
 * The events a package may emit: those of the table whose family belongs to a package (`worker:`).
 *
 * @example
 * ```ts
 * import type { PackageEventInput } from "@keel/core";
 * const e: PackageEventInput = { type: "worker:job", queue: "mail", jobId: "m1", attempt: 1, transition: "start" };
 * console.log(e.type); // worker:job
 * ```
 */
export type PackageEventInput = Extract<KeelEventInput, { type: `worker:${string}` | "deadline:missing" }>;

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
  // Called for every transition of every job: an operation of a module-level generator (a literal
  // `{ *[Symbol.iterator]() {…} }` makes a generator function per call, see kernel/bound-op.ts).
  if (type === "deadline:missing") return new BoundOp1(emitDeadlineMissing, event);
  if (typeof type !== "string" || !isPackageFamily(type))
    throw invalidRange(
      "emitEvent(event)",
      `an event of a package family (${PACKAGE_FAMILIES.join(", ")})`,
      type,
    );
  return new BoundOp1(emitPackageEvent, event);
}

function isPackageFamily(type: string): boolean {
  for (const family of PACKAGE_FAMILIES) if (type.startsWith(family)) return true;
  return false;
}

function* emitDeadlineMissing(event: PackageEventInput): Generator<unknown, void, unknown> {
  const { call, label } = event as Extract<PackageEventInput, { type: "deadline:missing" }>;
  warnNoDeadline(yield* currentTask("emitEvent(event)"), call, label);
}

function* emitPackageEvent(event: PackageEventInput): Generator<unknown, void, unknown> {
  const task = yield* currentTask("emitEvent(event)");
  task.emit(event as KeelEventInput);
}

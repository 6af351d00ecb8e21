/**
 * The opt-in warning for an external call made with no deadline anywhere above it.
 * @module
 */
import type { TaskImpl } from "./task.js";

/** The context key of `run(op, { warnNoDeadline })`: true when the tree asked for the warning. */
export const WARN_NO_DEADLINE_KEY: unique symbol = Symbol.for("keel.warn-no-deadline");

/**
 * @internal Emits `deadline:missing` when the tree asked for it and no deadline of the caller's bounds
 * the call (a limit of the call's own, such as an HTTP client's default total, does not count: the
 * caller chose no deadline). Called before the call opens its own scopes. One context read per call
 * when the option is off.
 */
export function checkDeadline(task: TaskImpl<unknown>, call: "http" | "job", label: string): void {
  if (task.effectiveDeadline() !== Infinity) return;
  warnNoDeadline(task, call, label);
}

/** @internal The warning itself, when the tree asked for it: for a caller that checked the deadline its own way. */
export function warnNoDeadline(task: TaskImpl<unknown>, call: "http" | "job", label: string): void {
  if (task.top.contexts[WARN_NO_DEADLINE_KEY] !== true) return;
  task.emit({ type: "deadline:missing", call, label });
}

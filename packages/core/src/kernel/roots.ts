/**
 * The live root tasks of the process (every `run`), so that `main` can end the process only once
 * the others have unwound (semantics §8: one process, one shutdown).
 * @module
 */
import type { TaskImpl } from "./task.js";

/** Invariant: exactly the roots started by `run` that have not settled, in start order. */
const live = new Set<TaskImpl<unknown>>();

/** Tracks `task` (a root) until it settles. */
export function trackRoot(task: TaskImpl<unknown>): void {
  live.add(task);
  task.whenSettled(() => live.delete(task));
}

/** The live roots other than `except`, oldest first. */
export function otherLiveRoots(except: TaskImpl<unknown>): TaskImpl<unknown>[] {
  const others: TaskImpl<unknown>[] = [];
  for (const task of live) if (task !== except) others.push(task);
  return others;
}

/**
 * The task as the files under `task.ts` name it. `frame.ts`, `frame-exit.ts` and `cancellable.ts`
 * hold tasks and call them, but `TaskImpl` is built on them, so they cannot import `task.ts`
 * without a circle. Instead `task.ts` fills in {@link TaskSlot} (a declaration merge), which makes
 * {@link TreeTask} exactly `TaskImpl<unknown>`: a type only, nothing at run time.
 * @module
 */

/** Filled in by `task.ts` with `task: TaskImpl<unknown>`; empty here so this file imports nothing. */
// biome-ignore lint/suspicious/noEmptyInterface: task.ts merges the member in (see the module comment).
export interface TaskSlot {}

/** A task of the tree, as `frame.ts`, `frame-exit.ts` and `cancellable.ts` name it: `TaskImpl<unknown>`. */
export type TreeTask = TaskSlot extends { readonly task: infer T } ? T : never;

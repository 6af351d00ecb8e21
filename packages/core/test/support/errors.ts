/**
 * Reading what a task or a `catch` ended with.
 * @module
 */
import { isCancelled } from "@keel/core";

/** Resolves with the error `task` rejects with (and fails if it resolves). */
export async function rejection(task: PromiseLike<unknown>): Promise<unknown> {
  try {
    await task;
  } catch (e) {
    return e;
  }
  throw new Error("expected the task to reject");
}

/** What `await task` rejected with (fails the test if it resolved, naming the value). */
export async function rejectionOf(task: PromiseLike<unknown>): Promise<unknown> {
  return task.then(
    (value) => {
      throw new Error(`expected a rejection, got the value ${String(value)}`);
    },
    (error: unknown) => error,
  );
}

/** What a `catch` saw, in one word: `Cancelled`, or the error's name. */
export function kindOf(e: unknown): string {
  if (isCancelled(e)) return "Cancelled";
  return e instanceof Error ? e.name : String(e);
}

/** The `suppressed` list attached to an error, or `[]`. */
export function suppressedOf(e: unknown): unknown[] {
  return ((e as { suppressed?: unknown[] }).suppressed ?? []).slice();
}

/**
 * The errors a store raises: a lost claim, and an entry written twice (an engine bug).
 * @module
 */
import { KeelError } from "@keel/core";

/**
 * A write under a claim that is no longer current: another process claimed the execution after
 * this one's lease ran out. The writer must stop running the execution at once.
 *
 * @example
 * ```ts
 * import { isLeaseLostError, LeaseLostError } from "@keel/workflow";
 * const e = new LeaseLostError("order-7", "worker-a", 3);
 * console.log(isLeaseLostError(e), e.message);
 * // true execution order-7: the claim of worker-a (generation 3) is no longer current
 * ```
 */
export class LeaseLostError extends KeelError {
  constructor(
    readonly executionId: string,
    readonly owner: string,
    readonly generation: number,
  ) {
    super(
      "KEEL_LEASE_LOST",
      `execution ${executionId}: the claim of ${owner} (generation ${generation}) is no longer current`,
    );
    this.name = "LeaseLostError";
  }
}

/**
 * True for a {@link LeaseLostError}.
 *
 * @example
 * ```ts
 * import { isLeaseLostError } from "@keel/workflow";
 * console.log(isLeaseLostError(new Error("x"))); // false
 * ```
 */
export function isLeaseLostError(e: unknown): e is LeaseLostError {
  return (e as { code?: unknown } | null)?.code === "KEEL_LEASE_LOST";
}

/**
 * A journal entry written twice under one claim: a bug of the engine (each key is written once).
 *
 * @example
 * ```ts
 * import { DuplicateEntryError } from "@keel/workflow";
 * console.log(new DuplicateEntryError("order-7", "step:charge#1").message);
 * // execution order-7: journal entry step:charge#1 is already written
 * ```
 */
export class DuplicateEntryError extends KeelError {
  constructor(
    readonly executionId: string,
    readonly key: string,
  ) {
    super("KEEL_DUPLICATE_ENTRY", `execution ${executionId}: journal entry ${key} is already written`);
    this.name = "DuplicateEntryError";
  }
}

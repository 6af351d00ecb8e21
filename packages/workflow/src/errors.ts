/**
 * The workflow errors: each names the rule it enforces (the workflows guide numbers them, W1-W12)
 * and has a stable `code`; the guards compare codes, so duplicate package copies agree.
 * @module
 */
import { KeelError } from "@keel/core";

/**
 * The body asked for a journal entry the journal does not have while entries it has not reached
 * remain (rule W4): the workflow's code changed under a running execution. Nothing is skipped:
 * the execution fails with this error.
 *
 * @example
 * ```ts
 * import { NonDeterminismError } from "@keel/workflow";
 * const e = new NonDeterminismError("order-7", "step:ship#1", "step:charge#1");
 * console.log(e.code, e.asked, e.unreached); // KEEL_WORKFLOW_NONDETERMINISM step:ship#1 step:charge#1
 * ```
 */
export class NonDeterminismError extends KeelError {
  constructor(
    readonly executionId: string,
    readonly asked: string,
    readonly unreached: string,
  ) {
    super(
      "KEEL_WORKFLOW_NONDETERMINISM",
      `execution ${executionId}: the body asked for ${asked}, which the journal does not have, while ` +
        `the journal's ${unreached} was never reached (rule W4: the workflow's code changed under a ` +
        "running execution; branch with patched(id) or start a new version for such changes)",
    );
    this.name = "NonDeterminismError";
  }
}

/**
 * The body waited on something that is not durable (rule W5): a raw `sleep`, a promise, an HTTP
 * call. It is thrown at that wait, where the body can see it; wrap the wait in a `step`.
 *
 * @example
 * ```ts
 * import { NonDurableWaitError } from "@keel/workflow";
 * console.log(new NonDurableWaitError("checkout", "sleep(200)").code); // KEEL_WORKFLOW_NON_DURABLE_WAIT
 * ```
 */
export class NonDurableWaitError extends KeelError {
  constructor(
    readonly workflow: string,
    readonly wait: string,
  ) {
    super(
      "KEEL_WORKFLOW_NON_DURABLE_WAIT",
      `workflow ${workflow}: the body waited on ${wait} outside a step (rule W5: a body waits only on ` +
        "steps, sleepFor/sleepUntil, waitForEvent and all/race/spawn over them); wrap it in " +
        `step("name", op), or use sleepFor for a pause`,
    );
    this.name = "NonDurableWaitError";
  }
}

/**
 * A value that cannot be journaled (rule W9): not JSON, or JSON that would come back different.
 *
 * @example
 * ```ts
 * import { NotJournalableError } from "@keel/workflow";
 * const e = new NotJournalableError("step charge's value", "at", "a Date is not plain JSON");
 * console.log(e.code, e.message); // KEEL_NOT_JOURNALABLE step charge's value: at: a Date is not plain JSON (rule W9)
 * ```
 */
export class NotJournalableError extends KeelError {
  constructor(
    readonly what: string,
    readonly path: string,
    readonly rule: string,
  ) {
    super("KEEL_NOT_JOURNALABLE", `${what}: ${path}: ${rule} (rule W9)`);
    this.name = "NotJournalableError";
  }
}

/**
 * A workflow operation (`step`, `sleepFor`, `waitForEvent`, ...) used outside a workflow's body, or
 * inside a step (steps do not nest: rule W2).
 *
 * @example
 * ```ts
 * import { NotInWorkflowError } from "@keel/workflow";
 * console.log(new NotInWorkflowError("step(\"charge\")").code); // KEEL_NOT_IN_WORKFLOW
 * ```
 */
export class NotInWorkflowError extends KeelError {
  constructor(
    readonly api: string,
    where = "in a workflow's body, outside any step (rule W2: steps do not nest; a step's operation is ordinary Keel code)",
  ) {
    super("KEEL_NOT_IN_WORKFLOW", `${api}: must run ${where}`);
    this.name = "NotInWorkflowError";
  }
}

/**
 * An execution of a workflow the engine was not given (or not at the execution's version).
 *
 * @example
 * ```ts
 * import { UnknownWorkflowError } from "@keel/workflow";
 * console.log(new UnknownWorkflowError("refund", 2, ["checkout@1"]).message);
 * // no workflow refund at version 2 in this engine (it has checkout@1)
 * ```
 */
export class UnknownWorkflowError extends KeelError {
  constructor(
    readonly workflow: string,
    readonly version: number | null,
    known: readonly string[],
  ) {
    super(
      "KEEL_UNKNOWN_WORKFLOW",
      `no workflow ${workflow}${version === null ? "" : ` at version ${version}`} in this engine ` +
        `(it has ${known.length === 0 ? "none" : known.join(", ")})`,
    );
    this.name = "UnknownWorkflowError";
  }
}

/**
 * What `engine.result(id)` throws for an execution that failed: the journaled error is the cause.
 *
 * @example
 * ```ts
 * import { WorkflowFailedError } from "@keel/workflow";
 * const e = new WorkflowFailedError("order-7", "failed", new Error("card declined"));
 * console.log(e.message); // execution order-7 failed: card declined
 * ```
 */
export class WorkflowFailedError extends KeelError {
  constructor(
    readonly executionId: string,
    readonly status: "failed" | "cancelled",
    cause: Error,
  ) {
    super(
      status === "failed" ? "KEEL_WORKFLOW_FAILED" : "KEEL_WORKFLOW_CANCELLED",
      `execution ${executionId} ${status === "failed" ? "failed" : "was cancelled"}: ${cause.message}`,
      { cause },
    );
    this.name = "WorkflowFailedError";
  }
}

/**
 * An execution's absolute deadline passed (rule W10): the execution is cancelled where it is, its
 * `finally` blocks run (compensation steps included), and it ends `failed` with this error.
 *
 * @example
 * ```ts
 * import { ExecutionDeadlineError } from "@keel/workflow";
 * console.log(new ExecutionDeadlineError("order-7", 86_400_000).code); // KEEL_EXECUTION_DEADLINE
 * ```
 */
export class ExecutionDeadlineError extends KeelError {
  constructor(
    readonly executionId: string,
    readonly deadlineAt: number,
  ) {
    super(
      "KEEL_EXECUTION_DEADLINE",
      `execution ${executionId}: its deadline (${new Date(deadlineAt).toISOString()}) passed`,
    );
    this.name = "ExecutionDeadlineError";
  }
}

/** True for any of this module's errors with `code`. */
export function hasCode(e: unknown, code: string): boolean {
  return (e as { code?: unknown } | null)?.code === code;
}

/**
 * No execution with this id (or, for a signal, none that has not ended).
 *
 * @example
 * ```ts
 * import { ExecutionNotFoundError } from "@keel/workflow";
 * console.log(new ExecutionNotFoundError("order-9").message); // no execution order-9
 * ```
 */
export class ExecutionNotFoundError extends KeelError {
  constructor(
    readonly executionId: string,
    more?: string,
  ) {
    super("KEEL_EXECUTION_NOT_FOUND", `no execution ${executionId}${more ? ` ${more}` : ""}`);
    this.name = "ExecutionNotFoundError";
  }
}

/**
 * Guards for the workflow errors, by `code` (so they hold for the restored errors of a journal or
 * a record, whose class is not kept, and across duplicate package copies).
 *
 * @example
 * ```ts
 * import { isNonDeterminismError, NonDeterminismError } from "@keel/workflow";
 * console.log(isNonDeterminismError(new NonDeterminismError("o", "step:a#1", "step:b#1"))); // true
 * ```
 */
export function isNonDeterminismError(e: unknown): e is NonDeterminismError {
  return hasCode(e, "KEEL_WORKFLOW_NONDETERMINISM");
}

/**
 * True for a {@link NonDurableWaitError} (by code).
 *
 * @example
 * ```ts
 * import { isNonDurableWaitError } from "@keel/workflow";
 * console.log(isNonDurableWaitError(new Error("x"))); // false
 * ```
 */
export function isNonDurableWaitError(e: unknown): e is NonDurableWaitError {
  return hasCode(e, "KEEL_WORKFLOW_NON_DURABLE_WAIT");
}

/**
 * True for a {@link NotJournalableError} (by code).
 *
 * @example
 * ```ts
 * import { isNotJournalableError } from "@keel/workflow";
 * console.log(isNotJournalableError({ code: "KEEL_NOT_JOURNALABLE" })); // true
 * ```
 */
export function isNotJournalableError(e: unknown): e is NotJournalableError {
  return hasCode(e, "KEEL_NOT_JOURNALABLE");
}

/**
 * True for a {@link WorkflowFailedError}, of a failed or of a cancelled execution (by code).
 *
 * @example
 * ```ts
 * import { isWorkflowFailedError, WorkflowFailedError } from "@keel/workflow";
 * console.log(isWorkflowFailedError(new WorkflowFailedError("o", "cancelled", new Error("no")))); // true
 * ```
 */
export function isWorkflowFailedError(e: unknown): e is WorkflowFailedError {
  return hasCode(e, "KEEL_WORKFLOW_FAILED") || hasCode(e, "KEEL_WORKFLOW_CANCELLED");
}

/**
 * True for an {@link ExecutionDeadlineError} (by code).
 *
 * @example
 * ```ts
 * import { isExecutionDeadlineError } from "@keel/workflow";
 * console.log(isExecutionDeadlineError({ code: "KEEL_EXECUTION_DEADLINE" })); // true
 * ```
 */
export function isExecutionDeadlineError(e: unknown): e is ExecutionDeadlineError {
  return hasCode(e, "KEEL_EXECUTION_DEADLINE");
}

/**
 * A store call that did not answer within the engine's `storeTimeoutMs`: an execution whose write
 * timed out stops in this process (another resumes it); a claim that timed out reports the store
 * down (`workflow:store`).
 *
 * @example
 * ```ts
 * import { StoreTimeoutError } from "@keel/workflow";
 * const e = new StoreTimeoutError("postgres 127.0.0.1:5432/app", "append order-7", 10_000);
 * console.log(e.code, e.message);
 * // KEEL_STORE_TIMEOUT workflow store postgres 127.0.0.1:5432/app: append order-7 did not answer within 10000 ms
 * ```
 */
export class StoreTimeoutError extends KeelError {
  constructor(
    readonly store: string,
    readonly call: string,
    readonly timeoutMs: number,
  ) {
    super("KEEL_STORE_TIMEOUT", `workflow store ${store}: ${call} did not answer within ${timeoutMs} ms`);
    this.name = "StoreTimeoutError";
  }
}

/**
 * Why Keel's operations have a `then` that throws: `await sleep(200)` in async code (an operation
 * awaited instead of run) would otherwise resolve at once to the operation object, running nothing
 * and waiting 0 ms, silently. JavaScript's `await` (and a promise resolved with a value, and an async
 * function's `return`) calls `then` when there is one, so a `then` that throws turns the mistake into
 * a rejection with `KEEL_OPERATION_AWAITED`, whose message says what to write instead. `yield*`
 * never reads `then`, so operations run as before.
 *
 * At the type level the same `then` takes a parameter that is no callback, so TypeScript refuses
 * the `await` (TS1320, "Type of 'await' operand must either be a valid promise or must not contain
 * a callable 'then' member") and an async function returning an operation (TS1058).
 *
 * Tasks and `task.cancel()`'s result are real promises and operations at once: their `then` is a
 * promise's, not this one.
 * @module
 */
import { KeelError } from "../errors.js";

/** What an awaited operation's `then` says, as a type: it shows in the editor at the mistake. */
export type OperationIsNotAPromise =
  "a Keel operation is not a promise: write `yield* op` inside a generator function, or `await run(() => op)`";

/**
 * The mark of an operation made by Keel (`sleep`, `timeout`, `all`, `race`, `spawn`, `until`,
 * `action`, `call`, …): it is not a promise. Awaiting one is a TypeScript error, and at run time
 * its `then` throws `KEEL_OPERATION_AWAITED` (so `await op` rejects), where it would otherwise
 * resolve at once without running anything. Run it with `yield*` inside a generator, or with `run`
 * from async code.
 *
 * @example
 * ```ts
 * import { isKeelError, type NotAPromise, type Operation, run, sleep } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const nap: Operation<void> & NotAPromise = sleep(200);
 * try {
 *   // @ts-expect-error TS1320: the operand of `await` must be a valid promise or have no `then`.
 *   await nap;
 * } catch (e) {
 *   console.log(isKeelError(e) && e.code); // KEEL_OPERATION_AWAITED
 * }
 * const clock = createVirtualClock();
 * await run(() => nap, { clock }); // what was meant
 * console.log(clock.now()); // 200
 * ```
 */
export interface NotAPromise {
  /**
   * Always throws `KEEL_OPERATION_AWAITED`: an operation is not a promise.
   * @deprecated Write `yield* op` inside a generator function, or `await run(() => op)`.
   */
  then(mistake: OperationIsNotAPromise): never;
}

/** @internal What to call an operation in the error: a getter or a field on the operation. */
export const OP_LABEL: unique symbol = Symbol("keel.op-label");

/** @internal The error an awaited operation throws, naming it. */
export function operationAwaited(label: string): KeelError {
  return new KeelError(
    "KEEL_OPERATION_AWAITED",
    `${label} is a Keel operation, not a promise: awaiting it would not run it (it would resolve at ` +
      "once, to the operation itself). Write `yield* op` inside a generator function, or " +
      "`await run(() => op)` in async code",
  );
}

/**
 * @internal The `then` of every operation Keel makes, one shared function: it reads the operation's
 * label from `this` (its {@link OP_LABEL}, else a suspension's `description`).
 */
export function awaitedThen(this: unknown): never {
  const op = this as { [OP_LABEL]?: unknown; description?: unknown } | null | undefined;
  const label = op?.[OP_LABEL] ?? op?.description;
  throw operationAwaited(typeof label === "string" ? label : "this operation");
}

/**
 * @internal Gives `proto` (a class of operations) the shared `then`, non-enumerable as a class
 * method is: on the prototype, so no instance grows a field.
 */
export function notAPromiseClass(proto: object): void {
  // biome-ignore lint/suspicious/noThenProperty: the point of this module.
  Object.defineProperty(proto, "then", { value: awaitedThen, configurable: true, writable: true });
}

/**
 * @internal Gives one operation object (a literal) the shared `then` and its label. For operations
 * made once (module constants) or off the hot paths: defining a property costs a map transition.
 */
export function notAPromise<O extends object>(op: O, label: string): O & NotAPromise {
  // biome-ignore lint/suspicious/noThenProperty: the point of this module.
  Object.defineProperty(op, "then", { value: awaitedThen, configurable: true, writable: true });
  Object.defineProperty(op, OP_LABEL, { value: label, configurable: true });
  return op as O & NotAPromise;
}

/** @internal Whether `value` is an operation that Keel marked as not a promise. */
export function isMarkedOperation(value: unknown): boolean {
  return typeof value === "object" && value !== null && (value as { then?: unknown }).then === awaitedThen;
}

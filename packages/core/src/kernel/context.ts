/**
 * Contexts: values that flow down the task tree, read with `get()` and set for a region with `with()`.
 * @module
 */

import { invalidType } from "../errors.js";
import { BoundOp3, nameBody } from "./bound-op.js";
import { type NotAPromise, notAPromise } from "./not-a-promise.js";
import { CURRENT_TASK, checkOp, iterate, type Op, type Operation } from "./operation.js";
import { runningTask, type TaskImpl } from "./task.js";

/**
 * A value that flows down the task tree.
 *
 * @example
 * ```ts
 * import { type Context, createContext, run, spawn } from "@keel/core";
 * const requestId: Context<string> = createContext("requestId", "-");
 * function* log(message: string) { console.log(`[${yield* requestId.get()}] ${message}`); }
 * await run(() => requestId.with("req-42", function* handler() {
 *   const audit = yield* spawn(function* audit() { yield* log("audited"); }); // children inherit the value
 *   yield* log("handled");
 *   yield* audit;
 * }));
 * // [req-42] handled, then [req-42] audited
 * ```
 */
export interface Context<T> {
  readonly name: string;
  /** Reads the value in force where the calling operation runs (the default outside any `with`). */
  get(): Operation<T>;
  /** Runs `op` with the value set; children spawned inside inherit it. */
  with<R>(value: T, op: Op<R>): Operation<R>;
}

/**
 * Creates a context.
 *
 * @example
 * ```ts
 * import { createContext, run } from "@keel/core";
 * const tenant = createContext<string>("tenant", "none");
 * const value = await run(() => tenant.with("acme", tenant.get()));
 * console.log(value); // "acme"
 * ```
 */
export function createContext<T>(name: string, defaultValue?: T): Context<T> {
  if (typeof name !== "string") throw invalidType("createContext(name)", "a string", name);
  const key = Symbol(name);
  // One operation per context, not per `get()`: operations are re-runnable.
  const getOp: Operation<T> & NotAPromise = notAPromise(
    {
      *[Symbol.iterator]() {
        const task = runningTask() ?? ((yield CURRENT_TASK) as TaskImpl<unknown>);
        const v = task.top.contexts[key];
        return (v === undefined ? defaultValue : v) as T;
      },
    },
    `${name}.get()`,
  );
  return {
    name,
    get() {
      return getOp;
    },
    with<R>(value: T, op: Op<R>): Operation<R> & NotAPromise {
      checkOp("op", op);
      return withContextValue(key, value, op);
    },
  };
}

/**
 * Runs `op` with `key` set to `value` on the current frame, restoring it after. Not a scope: children
 * spawned inside still belong to the enclosing scope, and keep the value they were spawned with.
 */
export function withContextValue<R>(key: symbol, value: unknown, op: Op<R>): Operation<R> & NotAPromise {
  return new BoundOp3(runWithContextValue, key, value, op) as Operation<R> & NotAPromise;
}

function* runWithContextValue<R>(key: symbol, value: unknown, op: Op<R>): Generator<unknown, R, unknown> {
  const task = runningTask() ?? ((yield CURRENT_TASK) as TaskImpl<unknown>);
  const frame = task.top;
  const saved = frame.contexts;
  frame.contexts = Object.create(saved, { [key]: { value, enumerable: true } });
  try {
    return yield* { [Symbol.iterator]: () => iterate(op) };
  } finally {
    frame.contexts = saved;
  }
}

// What an awaited one of these operations is called in its KEEL_OPERATION_AWAITED error.
nameBody(runWithContextValue, "context.with");

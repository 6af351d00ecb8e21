/**
 * Promise and callback interop: `until`, `call`, `action`, `useAbortSignal`.
 *
 * Each of these is a suspension point whose teardown runs when the task leaves it for any reason:
 * on cancellation the abort signal fires and callbacks are unregistered, and a promise that settles
 * later is ignored (its rejection is still handled, so it never becomes an unhandled rejection).
 * @module
 */

import { invalidType } from "../errors.js";
import { currentTask } from "./current.js";
import { isMarkedOperation, type NotAPromise, notAPromise } from "./not-a-promise.js";
import {
  type Operation,
  type Outcome,
  SelfSuspension,
  suspension,
  suspensionClass,
  type Waiter,
} from "./operation.js";
import { shapes } from "./shapes.js";

function abortReason(): Error {
  return new DOMException("the Keel operation was cancelled", "AbortError");
}

/**
 * Waits for a promise. The promise cannot be stopped, only abandoned: on cancellation the task moves
 * on at once and a later settlement is ignored. Prefer {@link call} when the work takes a signal.
 *
 * @example
 * ```ts
 * import { run, until } from "@keel/core";
 * const n = await run(() => until(Promise.resolve(42)));
 * console.log(n); // 42
 * ```
 */
export function until<T>(promise: PromiseLike<T>): Operation<T> & NotAPromise {
  // An operation made by Keel has a `then` too, one that throws (not-a-promise.ts): refuse it here,
  // at the call, where `yield*` is what was meant. A task is a promise: waiting for it is fine.
  if (typeof (promise as PromiseLike<T> | null)?.then !== "function" || isMarkedOperation(promise))
    throw invalidType("until(promise)", "a promise", promise);
  return new UntilPromise(promise);
}

/** The outcome of a wait that resolved with no value (most callback waits): shared, never mutated. */
const OK_VOID: Outcome<never> = Object.freeze({ ok: true, value: undefined as never });

class UntilPromise<T> extends SelfSuspension<T> {
  declare readonly description: "until(promise)";
  declare readonly interruptible: "normal";
  constructor(private readonly promise: PromiseLike<T>) {
    super();
    shapes.until = this;
  }
  // The waiter ignores a resolve once the task has left this wait: no teardown, no flag.
  enterWith(waiter: Waiter<T>): undefined {
    this.promise.then(
      (value) => waiter.resolve(value === undefined ? OK_VOID : { ok: true, value }),
      (error) => waiter.resolve({ ok: false, error }),
    );
    return undefined;
  }
}
suspensionClass(UntilPromise, "normal");
Object.defineProperty(UntilPromise.prototype, "description", { value: "until(promise)" });

/**
 * Calls `fn` with an `AbortSignal` and waits for what it returns (a value or a promise). The signal
 * aborts when the task leaves this suspension before `fn` settled: on cancellation, a timeout, or a
 * cleanup budget cut. `fn` is not called at all if a cancellation is already due.
 *
 * @example
 * ```ts
 * import { call, run, timeout } from "@keel/core";
 * const body = await run(() => timeout(5000, call((signal) => fetch("http://127.0.0.1:1/", { signal }).catch(() => "down"))));
 * console.log(body);
 * ```
 */
export function call<T>(fn: (signal: AbortSignal) => T | PromiseLike<T>): Operation<T> & NotAPromise {
  if (typeof fn !== "function") throw invalidType("call(fn)", "a function", fn);
  return suspension<T>({
    kind: "suspend",
    description: `call(${fn.name || "fn"})`,
    interruptible: "normal",
    enter(resolve) {
      const controller = new AbortController();
      let settled = false;
      const done = (o: Outcome<T>) => {
        if (settled) return;
        settled = true;
        resolve(o);
      };
      let result: T | PromiseLike<T>;
      try {
        result = fn(controller.signal);
      } catch (error) {
        done({ ok: false, error });
        return undefined;
      }
      if (typeof (result as PromiseLike<T> | null)?.then === "function") {
        (result as PromiseLike<T>).then(
          (value) => done({ ok: true, value }),
          (error) => done({ ok: false, error }),
        );
      } else {
        done({ ok: true, value: result as T });
      }
      return () => {
        if (!settled) {
          settled = true;
          controller.abort(abortReason());
        }
      };
    },
  });
}

/**
 * Waits on callbacks: `executor(resolve, reject)` starts the work and returns its teardown, which
 * runs exactly once when the task leaves this point (after a resolve, or on cancellation).
 *
 * @example
 * ```ts
 * import { action, run } from "@keel/core";
 * const v = await run(() => action<string>((resolve) => {
 *   const t = setTimeout(() => resolve("tick"), 5);
 *   return () => clearTimeout(t);
 * }));
 * console.log(v); // "tick"
 * ```
 */
export function action<T>(
  executor: (resolve: (value: T) => void, reject: (error: unknown) => void) => () => void,
  description = "action",
): Operation<T> & NotAPromise {
  if (typeof executor !== "function") throw invalidType("action(executor)", "a function", executor);
  return new ActionWait(executor, description);
}

class ActionWait<T> extends SelfSuspension<T> {
  declare readonly interruptible: "normal";
  constructor(
    private readonly executor: (resolve: (value: T) => void, reject: (error: unknown) => void) => () => void,
    readonly description: string,
  ) {
    super();
    shapes.action = this;
  }
  enterWith(waiter: Waiter<T>): (() => void) | undefined {
    const teardown = this.executor(
      (value) => waiter.resolve(value === undefined ? OK_VOID : { ok: true, value }),
      (error) => waiter.resolve({ ok: false, error }),
    );
    if (teardown !== undefined && typeof teardown !== "function") {
      throw invalidType("action(executor)", "an executor that returns a teardown function", teardown);
    }
    return teardown;
  }
}
suspensionClass(ActionWait, "normal");

/**
 * Returns an `AbortSignal` tied to the current scope: it aborts when that scope ends, however it
 * ends (even normally), so work started with it cannot outlive its owner.
 *
 * @example
 * ```ts
 * import { run, scoped, useAbortSignal } from "@keel/core";
 * const signal = await run(() => scoped(useAbortSignal));
 * console.log(signal.aborted); // true: its scope has ended
 * ```
 */
export function useAbortSignal(): Operation<AbortSignal> & NotAPromise {
  return USE_ABORT_SIGNAL;
}

/** Shared: it holds no state, and a literal with a generator method per call costs ~400 ns. */
const USE_ABORT_SIGNAL: Operation<AbortSignal> & NotAPromise = notAPromise(
  {
    *[Symbol.iterator]() {
      const task = yield* currentTask("useAbortSignal()");
      const controller = new AbortController();
      task.top.onExit(() => controller.abort(abortReason()));
      return controller.signal;
    },
  },
  "useAbortSignal()",
);

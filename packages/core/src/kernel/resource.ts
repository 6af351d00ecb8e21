/**
 * `resource`: a value whose setup and teardown are tied to the caller's scope.
 * @module
 */

import { invalidType } from "../errors.js";
import { currentTask, delegate } from "./current.js";
import { type NotAPromise, notAPromise } from "./not-a-promise.js";
import type { Operation, Outcome } from "./operation.js";
import { spawnInto } from "./spawn.js";
import { suspend } from "./suspend.js";

/**
 * Creates a resource: `body` sets something up, hands it over with `yield* provide(value)`, and
 * tears it down in a `finally` when the caller's scope ends (async teardown allowed, under the
 * cleanup budget). A cancellation of the caller's region does not tear it down early. When the
 * scope exits, its task children are cancelled and awaited first (their `finally` blocks and the
 * scope's own may still use the resource); then its resources are torn down one at a time, newest
 * first, so a resource built on another closes before it. The body runs as a child task of the
 * caller's current scope, so the resource can never outlive the scope that asked for it, and an
 * error in it fails that scope.
 *
 * @example
 * ```ts
 * import { resource, run, scoped, sleep } from "@keel/core";
 * const useTicker = () => resource<{ ticks: number }>(function* ticker(provide) {
 *   const state = { ticks: 0 };
 *   const id = setInterval(() => state.ticks++, 1);
 *   try { yield* provide(state); } finally { clearInterval(id); }
 * });
 * await run(() => scoped(function* () { const t = yield* useTicker(); yield* sleep(5); return t.ticks; }));
 * ```
 * @throws `TypeError` when `body` is not a function.
 */
export function resource<T>(
  body: (provide: (value: T) => Operation<never>) => Operation<void>,
  options: { name?: string } = {},
): Operation<T> & NotAPromise {
  if (typeof body !== "function")
    throw invalidType("resource(body)", "a function returning an operation", body);
  const name = options.name ?? (body.name || "resource");
  return notAPromise(
    {
      *[Symbol.iterator]() {
        const task = yield* currentTask(`resource(${name})`);
        task.checkpoint();
        let provided: { value: T } | null = null;
        let wake: (() => void) | null = null;
        const provide = (value: T): Operation<never> =>
          notAPromise(
            {
              *[Symbol.iterator]() {
                provided = { value };
                wake?.();
                return yield* suspend();
              },
            },
            "provide(value)",
          );
        const child = spawnInto(task.top, () => delegate(() => body(provide)), name, { resource: true });
        yield {
          kind: "suspend" as const,
          description: `resource ${name}: setting up`,
          interruptible: "normal" as const,
          enter(resolve: (o: Outcome<void>) => void) {
            if (provided) {
              resolve({ ok: true, value: undefined });
              return undefined;
            }
            wake = () => resolve({ ok: true, value: undefined });
            const off = child.onSettled(() => resolve({ ok: true, value: undefined }));
            return () => {
              wake = null;
              off();
            };
          },
        };
        const p = provided as { value: T } | null;
        if (p) return p.value;
        const o = child.joinOutcome();
        throw o.ok ? new Error(`resource(${name}) returned without providing a value`) : o.error;
      },
    },
    `resource(${name})`,
  );
}

/**
 * `suspend`: wait until cancelled.
 * @module
 */
import type { NotAPromise } from "./not-a-promise.js";
import { neverResuming, type Operation, type Suspension } from "./operation.js";

const forever: Suspension<never> = {
  kind: "suspend",
  description: "suspend()",
  interruptible: "normal",
  enter: () => undefined,
  enterWith: () => undefined,
};
/** One for every caller: a task parked for good costs nothing here (a server's 100k connections). */
const suspendForever = neverResuming(forever);

/**
 * Suspends the calling task until it is cancelled; it never returns normally.
 *
 * @example
 * ```ts
 * import { run, suspend } from "@keel/core";
 * const server = run(function* serve() {
 *   try { yield* suspend(); } finally { console.log("closing"); }
 * });
 * await server.cancel(); // prints "closing"
 * ```
 */
export function suspend(): Operation<never> & NotAPromise {
  return suspendForever;
}

/**
 * `suspend`: wait until cancelled.
 * @module
 */
import { type Operation, type Suspension, suspension } from "./operation.js";

const forever: Suspension<never> = {
  kind: "suspend",
  description: "suspend()",
  interruptible: "normal",
  enter: () => undefined,
};

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
export function suspend(): Operation<never> {
  return suspension(forever);
}

/**
 * `workflow(name, body)`: a workflow's definition, what an engine runs and `start` names.
 * @module
 */
import type { Operation } from "@keel/core";
import { invalidRange, invalidType } from "./checks.js";

/**
 * A workflow: a name, a version, and a generator body whose side effects are steps. What
 * {@link workflow} returns, an engine runs (`startWorkflowEngine({ workflows })`) and `start` names.
 * @typeParam I - the input an execution starts with (JSON).
 * @typeParam O - what the body returns (JSON).
 *
 * @example
 * ```ts
 * import { step, type Workflow, workflow } from "@keel/workflow";
 * const v2: Workflow<{ cents: number }, string> = workflow(
 *   "charge",
 *   function* (input: { cents: number }) {
 *     return yield* step("charge", function* () { return `ch_${input.cents}`; });
 *   },
 *   { version: 2 },
 * );
 * console.log(v2.name, v2.version); // charge 2
 * ```
 */
export interface Workflow<I = unknown, O = unknown> {
  /** The name executions are stored under (at most 200 characters). */
  readonly name: string;
  /** Executions record the version they started on and run only on a definition of that version. */
  readonly version: number;
  /** The generator the engine runs, from its start, on each claim of an execution (rule W3). */
  readonly body: (input: I) => Operation<O>;
}

/**
 * Defines a workflow. The body runs again from its start after a crash, a park or a restart, so it
 * must be deterministic outside its steps: its side effects are `step`s, it waits only on steps,
 * `sleepFor`/`sleepUntil`, `waitForEvent` and `all`/`race`/`spawn` over them, and it reads time and
 * randomness through the workflow's `now()` and `random()`.
 *
 * @example
 * ```ts
 * import { step, workflow } from "@keel/workflow";
 * const greet = workflow("greet", function* (name: string) {
 *   const text = yield* step("compose", function* () { return `hello, ${name}`; });
 *   return text;
 * });
 * console.log(greet.name, greet.version); // greet 1
 * ```
 */
export function workflow<I, O>(
  name: string,
  body: (input: I) => Operation<O>,
  options: { version?: number } = {},
): Workflow<I, O> {
  if (typeof name !== "string" || name.length === 0 || name.length > 200)
    throw invalidType("workflow(name)", "a non-empty string of at most 200 characters", name);
  if (typeof body !== "function" || body.constructor?.name === "AsyncFunction")
    throw invalidType(
      "workflow(name, body)",
      "a generator function (function* (input) { … }); promise code goes in a step",
      body,
    );
  if (typeof options !== "object" || options === null)
    throw invalidType("workflow(name, body, options)", "an object", options);
  const version = options.version ?? 1;
  if (typeof version !== "number" || !Number.isInteger(version) || version < 1)
    throw invalidRange("workflow(name, body, { version })", "a whole number ≥ 1", version);
  return Object.freeze({ name, version, body });
}

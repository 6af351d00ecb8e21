/**
 * `testWorkflow`: runs one execution of a workflow on the virtual clock, crashing it at the journal
 * entries you name and replaying it on the same store each time, and says which steps ran again.
 * @module
 */
import { type Clock, isCancelled, type KeelEvent, race, run, scoped, sleep, until } from "@keel/core";
import {
  createMemoryStore,
  type ExecutionView,
  type JournalEntry,
  startWorkflowEngine,
  type Workflow,
  type WorkflowStore,
} from "@keel/workflow";
import { createVirtualClock } from "../virtual-clock.js";
import { crashingStore } from "./crashing-store.js";

/**
 * What {@link testWorkflow} takes besides the workflow and its input: where to crash, what to send
 * it, and what to run it on.
 *
 * @example
 * ```ts
 * import { type TestWorkflowOptions, testWorkflow } from "@keel/testing/workflow";
 * import { step, waitForEvent, workflow } from "@keel/workflow";
 * const approve = workflow("approve", function* () {
 *   const { by } = yield* waitForEvent<{ by: string }>("approved");
 *   return yield* step("record", function* () { return `approved by ${by}`; });
 * });
 * const options: TestWorkflowOptions = {
 *   id: "approval-1",
 *   crashAt: ["step:record#1"],
 *   *during(engine) {
 *     yield* engine.signal("approval-1", "approved", { by: "ops" });
 *   },
 * };
 * const r = await testWorkflow(approve, null, options);
 * console.log(r.result, r.ranAgain); // approved by ops [ 'record#1' ]
 * ```
 */
export interface TestWorkflowOptions {
  /** Journal keys to crash at, in order (`step:charge#1`): one "process" dies at each, the next replays. */
  readonly crashAt?: string | readonly string[];
  /** The store (default a fresh in-memory one): pass a real one to test on it. */
  readonly store?: WorkflowStore;
  /** The clock (default a fresh virtual clock: sleeps of days take milliseconds). */
  readonly clock?: Clock;
  /** Other workflows the engines run (a workflow that starts others). */
  readonly workflows?: readonly Workflow<never, unknown>[];
  /** The execution's id (default `test`). */
  readonly id?: string;
  /** Called with the engine before the execution starts, and after each crash (to send signals). */
  readonly during?: (engine: import("@keel/workflow").WorkflowEngine) => import("@keel/core").Operation<void>;
}

/**
 * What {@link testWorkflow} returns: how the execution ended, and what ran how many times.
 *
 * @example
 * ```ts
 * import { testWorkflow, type WorkflowTestRun } from "@keel/testing/workflow";
 * import { step, workflow } from "@keel/workflow";
 * const refund = workflow("refund", function* (cents: number) {
 *   yield* step("refund", function* () {
 *     if (cents > 1_000) throw new RangeError(`refund of ${cents}: above the limit`);
 *   });
 * });
 * const r: WorkflowTestRun = await testWorkflow(refund, 5_000);
 * console.log(r.status, r.error?.name, r.error?.message, r.runs.get("refund#1"));
 * // failed RangeError refund of 5000: above the limit 1
 * ```
 */
export interface WorkflowTestRun {
  /** How it ended: `completed`, `failed` or `cancelled`. */
  readonly status: ExecutionView["status"];
  /** The result, for an execution that completed. */
  readonly result?: unknown;
  /** The error, for one that failed or was cancelled. */
  readonly error?: Error;
  /** How many times each step's operation started, by key (`charge#1`). */
  readonly runs: ReadonlyMap<string, number>;
  /** The steps whose operation started more than once (the ones in flight at a crash). */
  readonly ranAgain: readonly string[];
  /** The keys the "processes" died at, in order. */
  readonly crashedAt: readonly string[];
  /** The execution's journal at its end. */
  readonly journal: readonly JournalEntry[];
  /** The execution as `engine.get` shows it at its end. */
  readonly view: ExecutionView;
}

/**
 * Runs `workflow` with `input` to its end on the virtual clock, killing its "process" at each of
 * `crashAt` and replaying on the same store (a new engine each time, after the dead one's lease).
 *
 * @example
 * ```ts
 * import { testWorkflow } from "@keel/testing/workflow";
 * import { step, workflow } from "@keel/workflow";
 * const order = workflow("order", function* (cents: number) {
 *   const charge = yield* step("charge", function* () { return `ch_${cents}`; });
 *   return yield* step("receipt", function* () { return `receipt for ${charge}`; });
 * });
 * const r = await testWorkflow(order, 500, { crashAt: "step:receipt#1" });
 * console.log(r.result, r.ranAgain, r.crashedAt); // receipt for ch_500 ["receipt#1"] ["step:receipt#1"]
 * ```
 */
export async function testWorkflow<I>(
  workflow: Workflow<I, unknown>,
  input: I,
  options: TestWorkflowOptions = {},
): Promise<WorkflowTestRun> {
  const store = options.store ?? createMemoryStore();
  const crashes =
    options.crashAt === undefined
      ? []
      : typeof options.crashAt === "string"
        ? [options.crashAt]
        : [...options.crashAt];
  const id = options.id ?? "test";
  const defs = [workflow as Workflow<never, unknown>, ...(options.workflows ?? [])];
  const runs = new Map<string, number>();
  const onEvent = (e: KeelEvent) => {
    if (e.type === "workflow:step" && e.transition === "start" && e.executionId === id)
      runs.set(e.key, (runs.get(e.key) ?? 0) + 1);
  };
  const crashedAt: string[] = [];
  const leaseMs = 30_000;
  // The engines wake when the store says something is due; polling is for work from elsewhere.
  const pollMs = 3_600_000;
  const view = await run(
    function* () {
      let started = false;
      for (const [n, at] of crashes.entries()) {
        const dying = crashingStore(store, at);
        yield* scoped(function* () {
          const engine = yield* startWorkflowEngine({
            store: dying.store,
            workflows: defs,
            owner: `process-${n + 1}`,
            leaseMs,
            pollMs,
          });
          if (!started) yield* engine.start(workflow, input, { id });
          started = true;
          if (options.during) yield* options.during(engine);
          const ended = function* () {
            try {
              yield* engine.result(id);
            } catch (e) {
              if (isCancelled(e)) throw e;
            }
            throw new Error(
              `testWorkflow: the execution ended before it reached ${at} (check the key: step:name#n)`,
            );
          };
          yield* race([until(dying.whenCrashed), ended]);
        });
        crashedAt.push(at);
        yield* sleep(leaseMs);
      }
      const engine = yield* startWorkflowEngine({
        store,
        workflows: defs,
        owner: `process-${crashes.length + 1}`,
        leaseMs,
        pollMs,
      });
      if (!started) yield* engine.start(workflow, input, { id });
      if (options.during) yield* options.during(engine);
      try {
        yield* engine.result(id);
      } catch (e) {
        if (isCancelled(e)) throw e;
      }
      return (yield* engine.get(id))!;
    },
    { clock: options.clock ?? createVirtualClock(), onEvent },
  );
  const journal = await store.journal(id);
  return {
    status: view.status,
    ...(view.status === "completed" ? { result: view.output } : {}),
    ...(view.error ? { error: view.error } : {}),
    runs,
    ranAgain: [...runs].filter(([, n]) => n > 1).map(([k]) => k),
    crashedAt,
    journal,
    view,
  };
}

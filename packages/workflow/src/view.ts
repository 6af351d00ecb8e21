/**
 * What `engine.get(id)` shows of an execution: its record, and its journal read for people (each
 * step with its attempts and duration, the sleeps and events it went through, what it waits on).
 * @module
 */
import { restoreError, unwrapValue } from "./json.js";
import type { ExecutionRecord, ExecutionStatus, JournalEntry } from "./store/store.js";

/**
 * One entry of an execution's journal as `engine.get(id)` shows it: a step with its attempts and
 * duration, a durable sleep, an event taken. (`now()`, `random()` and `patched()` reads are in
 * `engine.journal(id)` only.)
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * import { createMemoryStore, sleepFor, startWorkflowEngine, step, type StepView, workflow } from "@keel/workflow";
 * const w = workflow("nap", function* () {
 *   yield* sleepFor(60_000);
 *   return yield* step("wake", function* () { return "up"; });
 * });
 * await run(function* () {
 *   const engine = yield* startWorkflowEngine({ store: createMemoryStore(), workflows: [w] });
 *   yield* engine.start(w, null, { id: "n-1" });
 *   yield* engine.result("n-1");
 *   const steps: readonly StepView[] = (yield* engine.get("n-1"))!.steps;
 *   console.log(steps.map((s) => `${s.key} ${s.kind} ${s.ok}`)); // [ 'sleep:#1 sleep true', 'wake#1 step true' ]
 * }, { clock: createVirtualClock() });
 * ```
 */
export interface StepView {
  /** A step's `charge#1` (`0.1/charge#1` in a spawned branch); other entries by their journal key (`sleep:#1`, `event:approved#1`). */
  readonly key: string;
  /** `step`, `sleep` or `event`. */
  readonly kind: JournalEntry["kind"];
  /** False for a step that failed or an event wait that timed out. */
  readonly ok: boolean;
  /** How many times the step's operation ran in the journaled run (its retries included). */
  readonly attempts: number;
  /** From its start to its outcome (a sleep: from its first reach to its wake instant's entry). */
  readonly durationMs: number;
  /** When it began, on the engine's clock. */
  readonly startedAt: number;
  /** When its outcome was journaled. */
  readonly endedAt: number;
  /** The value (ok) or the error's message. */
  readonly value?: unknown;
  readonly error?: string;
}

/**
 * An execution as `engine.get(id)` shows it: its status, its steps, what it waits on, and its
 * outcome once it has ended (the error restored as an `Error`, rule W3).
 *
 * @example
 * ```ts
 * import { run, sleep } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * import { createMemoryStore, type ExecutionView, startWorkflowEngine, waitForEvent, workflow } from "@keel/workflow";
 * const w = workflow("approval", function* () { return yield* waitForEvent("approved", { timeoutMs: 86_400_000 }); });
 * await run(function* () {
 *   const engine = yield* startWorkflowEngine({ store: createMemoryStore(), workflows: [w], pollMs: 3_600_000 });
 *   yield* engine.start(w, null, { id: "a-1" });
 *   yield* sleep(5_000); // the body reaches its wait, and is parked
 *   const view: ExecutionView | null = yield* engine.get("a-1");
 *   console.log(view?.status, view?.waitingOn); // waiting event "approved" until 1970-01-02T00:00:00.000Z
 *   yield* engine.cancel("a-1", "not needed");
 * }, { clock: createVirtualClock() });
 * ```
 */
export interface ExecutionView {
  /** The execution's id. */
  readonly id: string;
  /** Its workflow's name. */
  readonly workflow: string;
  /** The version it started on, and runs on. */
  readonly version: number;
  /** Where it is: see `ExecutionStatus`. */
  readonly status: ExecutionStatus;
  /** When it was created, on the engine's clock. */
  readonly createdAt: number;
  /** Its absolute deadline, or null. */
  readonly deadlineAt: number | null;
  /** What it waits on, for a parked execution: `sleep until …`, `event "approved"`. */
  readonly waitingOn: string | null;
  /** The process that holds its claim, or null. */
  readonly owner: string | null;
  /** Its steps, sleeps and events taken, in the order journaled. */
  readonly steps: readonly StepView[];
  /** The result, for a `completed` execution. */
  readonly output?: unknown;
  /** The error, for a `failed` or `cancelled` one: rebuilt from the journal (compare its `name` or `code`). */
  readonly error?: Error;
  /** The record as the store holds it. */
  readonly record: ExecutionRecord;
}

export function viewOf(record: ExecutionRecord, journal: readonly JournalEntry[]): ExecutionView {
  const steps = journal
    .filter(
      (e) => e.kind === "step" || e.kind === "sleep" || (e.kind === "event" && !e.key.endsWith(":timeout")),
    )
    .map((e) => ({
      key: e.kind === "step" ? e.key.slice("step:".length) : e.key,
      kind: e.kind,
      ok: e.ok,
      attempts: e.attempts,
      durationMs: Math.round((e.endedAt - e.startedAt) * 10) / 10,
      startedAt: e.startedAt,
      endedAt: e.endedAt,
      ...(e.ok ? { value: e.kind === "step" ? unwrapValue(e.value) : e.value } : { error: e.error?.message }),
    }));
  return {
    id: record.id,
    workflow: record.workflow,
    version: record.version,
    status: record.status,
    createdAt: record.createdAt,
    deadlineAt: record.deadlineAt,
    waitingOn: record.waitingOn,
    owner: record.owner,
    steps,
    ...(record.status === "completed" ? { output: unwrapValue(record.output) } : {}),
    ...(record.error ? { error: restoreError(record.error) } : {}),
    record,
  };
}

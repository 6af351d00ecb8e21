/**
 * `step(name, op)`: a workflow's side effect, run once per execution and journaled (rule W1).
 * @module
 */
import {
  emitEvent,
  eventsWanted,
  guardWaits,
  isCancelled,
  type Op,
  type Operation,
  type RetryPolicy,
  retry,
  spawn,
  type Task,
  timeout,
  timeoutAt,
  useTask,
} from "@keel/core";
import { checkKeys, checkMs, checkObject, invalidType } from "./checks.js";
import { CURRENT, incarnationOf, stepInfoOf } from "./current.js";
import { DurableWait } from "./durable-wait.js";
import { NotInWorkflowError } from "./errors.js";
import type { Incarnation } from "./incarnation.js";
import { journalError, restoreError, unwrapValue, wrapValue } from "./json.js";
import type { JournalEntry } from "./store/store.js";

/**
 * How a {@link step} runs its operation: retried with Keel's `retry` policy, each attempt bounded.
 * The step's journaled outcome is its last attempt's (rule W1).
 *
 * **Time.** `timeoutMs` bounds each attempt; the execution's deadline (`start(…, { ttlMs })`)
 * bounds them all, backoffs included.
 *
 * @example
 * ```ts
 * import { exponential } from "@keel/core";
 * import type { StepOptions } from "@keel/workflow";
 * const options: StepOptions = {
 *   retry: { attempts: 4, backoff: exponential({ baseMs: 200, factor: 2, maxMs: 5_000, jitter: "full" }) },
 *   timeoutMs: 10_000,
 * };
 * console.log(options.retry?.attempts, options.timeoutMs); // 4 10000
 * ```
 */
export interface StepOptions {
  /** Retries of the step's operation (Keel's `retry` policy); the step's outcome is the last one's. */
  readonly retry?: RetryPolicy;
  /** A bound on each attempt; past it the attempt fails with a `TimeoutError`. */
  readonly timeoutMs?: number;
}

/**
 * What a running step can read of itself (`stepInfo()`): its stable key for idempotency. The same
 * on every run of the step, in every process, so an API given `idempotencyKey` absorbs a re-run.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createMemoryStore, startWorkflowEngine, step, type StepInfo, stepInfo, workflow } from "@keel/workflow";
 * const w = workflow("info", function* () {
 *   return yield* step("charge", function* (): Generator<unknown, StepInfo, unknown> {
 *     return { ...(yield* stepInfo()) };
 *   });
 * });
 * await run(function* () {
 *   const engine = yield* startWorkflowEngine({ store: createMemoryStore(), workflows: [w] });
 *   yield* engine.start(w, null, { id: "order-7" });
 *   console.log(yield* engine.result("order-7"));
 *   // { executionId: 'order-7', key: 'charge#1', idempotencyKey: 'order-7/charge#1' }
 * });
 * ```
 */
export interface StepInfo {
  /** The execution's id, as given to `engine.start(…, { id })`. */
  readonly executionId: string;
  /** `charge#1`: the step's name and occurrence (with its branch's path for a spawned branch). */
  readonly key: string;
  /** `order-7/charge#1`: pass it to the APIs the step calls as their idempotency key. */
  readonly idempotencyKey: string;
}

/**
 * Runs `op` as a step of the workflow: once per execution, its value (or its final error, after
 * its own retries) journaled before the body goes on (rule W1). On a replay a journaled step
 * returns its value, or throws the same error, without running. A step in flight when its process
 * dies runs again: at least once per step, so give the APIs it calls `stepInfo().idempotencyKey`.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createMemoryStore, startWorkflowEngine, step, workflow } from "@keel/workflow";
 * const charge = workflow("charge", function* (cents: number) {
 *   const id = yield* step("charge", function* () { return `ch_${cents}`; }, { timeoutMs: 5_000 });
 *   return id;
 * });
 * await run(function* () {
 *   const engine = yield* startWorkflowEngine({ store: createMemoryStore(), workflows: [charge] });
 *   const execution = yield* engine.start(charge, 250, { id: "order-1" });
 *   console.log(yield* engine.result(execution.id)); // ch_250
 * });
 * ```
 */
export function step<T>(name: string, op: Op<T>, options: StepOptions = {}): Operation<T> {
  if (typeof name !== "string" || name.length === 0 || name.length > 200 || /[#/]/.test(name))
    throw invalidType("step(name)", "a non-empty string of at most 200 characters, without # or /", name);
  if (typeof op !== "function" && (typeof op !== "object" || op === null))
    throw invalidType(`step("${name}", op)`, "an operation or a function returning one", op);
  checkKeys(`step("${name}", op, options)`, checkObject(`step("${name}", op, options)`, options), [
    "retry",
    "timeoutMs",
  ]);
  if (options.timeoutMs !== undefined)
    checkMs(`step("${name}", op, { timeoutMs })`, options.timeoutMs, { min: 1 });
  return {
    *[Symbol.iterator]() {
      const inc = incarnationOf(yield* CURRENT.get());
      if (inc === null) throw new NotInWorkflowError(`step("${name}")`);
      const key = inc.key("step", yield* useTask(), name);
      const found = yield* inc.take(key);
      const wanted = yield* eventsWanted();
      const event = {
        type: "workflow:step",
        workflow: inc.definition.name,
        executionId: inc.id,
        key: key.slice(5),
      } as const;
      if (found) {
        if (wanted)
          yield* emitEvent({
            ...event,
            transition: "replay",
            ok: found.ok,
            attempts: found.attempts,
            durationMs: found.endedAt - found.startedAt,
          });
        return replayed<T>(found);
      }
      yield* beginNew(inc, key);
      if (wanted) yield* emitEvent({ ...event, transition: "start" });
      const entry = yield* runStep(inc, key, name, op, options);
      if (wanted)
        yield* emitEvent({
          ...event,
          transition: "end",
          ok: entry.ok,
          attempts: entry.attempts,
          durationMs: entry.endedAt - entry.startedAt,
          ...(entry.ok ? {} : { error: restoreError(entry.error!) }),
        });
      return replayed<T>(entry);
    },
  };
}

/** A journaled step's outcome: its value, or its error thrown again. */
export function replayed<T>(entry: JournalEntry): T {
  if (!entry.ok) throw restoreError(entry.error!);
  return unwrapValue(entry.value) as T;
}

/**
 * Waits, when the run is replaying or a stop is pending, until new work may start (see
 * `Incarnation`'s invariants); throws the execution's fatal error if it has one.
 */
export function* beginNew(inc: Incarnation, key: string): Generator<unknown, void, unknown> {
  if (inc.fatal !== null) throw inc.fatal;
  if (inc.state !== "running")
    yield* new DurableWait<never>(`${key}: the execution is stopping`, () => undefined);
  if (inc.freeToRun) return;
  yield* new DurableWait<void>(`${key}: waiting for the replay to settle`, (resolve) =>
    inc.hold({
      key,
      release: (error) => resolve(error === null ? { ok: true, value: undefined } : { ok: false, error }),
    }),
  );
}

function* runStep(
  inc: Incarnation,
  key: string,
  name: string,
  op: Op<unknown>,
  options: StepOptions,
): Generator<unknown, JournalEntry, unknown> {
  const startedAt = inc.clock.now();
  let attempts = 0;
  const once = function* (): Generator<unknown, unknown, unknown> {
    attempts++;
    return yield* typeof op === "function" ? (op as () => Operation<unknown>)() : op;
  };
  const timed: () => Operation<unknown> =
    options.timeoutMs === undefined ? once : () => timeout(options.timeoutMs!, once);
  const retried: () => Operation<unknown> =
    options.retry === undefined ? timed : () => retry(timed, options.retry);
  const deadlineAt = inc.record.deadlineAt;
  const bounded: () => Operation<unknown> =
    deadlineAt === null
      ? retried
      : () => timeoutAt(deadlineAt, retried, { label: "the execution's deadline" });
  const info: StepInfo = {
    executionId: inc.id,
    key: key.slice("step:".length),
    idempotencyKey: `${inc.id}/${key.slice("step:".length)}`,
  };
  inc.spawningStep = true;
  const child: Task<{ ok: boolean; value?: unknown; error?: unknown }> = yield* spawn(
    CURRENT.with(
      info,
      guardWaits(null, function* stepRun() {
        try {
          return { ok: true, value: yield* bounded() };
        } catch (error) {
          // A step cancelled (its body stopped, a shutdown) has no outcome to journal: it ends
          // cancelled, and runs again on the next replay.
          if (isCancelled(error)) throw error;
          return { ok: false, error };
        }
      }),
    ),
    { name: `step ${key.slice("step:".length)}` },
  );
  inc.steps.add(child);
  return yield* new DurableWait<JournalEntry>(`step ${key.slice("step:".length)}`, (resolve) => {
    child.then(
      (result) => {
        inc.steps.delete(child);
        if (inc.state !== "running") return;
        const entry = stepEntry(key, name, result, attempts, startedAt, inc.clock.now());
        inc.write([entry]).then(
          () => {
            inc.stepEnded();
            resolve({ ok: true, value: entry });
          },
          () => {},
        );
      },
      () => {
        inc.steps.delete(child);
        inc.checkSoon();
      },
    );
    return undefined;
  });
}

function stepEntry(
  key: string,
  name: string,
  result: { ok: boolean; value?: unknown; error?: unknown },
  attempts: number,
  startedAt: number,
  endedAt: number,
): JournalEntry {
  const base = { key, kind: "step" as const, attempts, startedAt, endedAt };
  if (result.ok) {
    try {
      return { ...base, ok: true, value: wrapValue(result.value, `step ${name}'s value`), error: null };
    } catch (error) {
      return { ...base, ok: false, value: null, error: journalError(error) };
    }
  }
  return { ...base, ok: false, value: null, error: journalError(result.error) };
}

/**
 * Inside a step's operation: the step's identity, and the idempotency key to give the APIs it calls.
 *
 * @example
 * ```ts
 * import { step, stepInfo } from "@keel/workflow";
 * // inside a workflow's body:
 * function* chargeCard(cents: number) {
 *   return yield* step("charge", function* () {
 *     const { idempotencyKey } = yield* stepInfo();
 *     return { cents, idempotencyKey }; // e.g. "order-7/charge#1"
 *   });
 * }
 * console.log(typeof chargeCard); // function
 * ```
 */
export function stepInfo(): Operation<StepInfo> {
  return {
    *[Symbol.iterator]() {
      const info = stepInfoOf(yield* CURRENT.get());
      if (info === null) throw new NotInWorkflowError("stepInfo()", "inside a step's operation");
      return info;
    },
  };
}

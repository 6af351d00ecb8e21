/**
 * Log fields: names a task carries into every log record about it (a worker's delivery: its queue,
 * job id and attempt), and into the host's async context its steps run in, where a logger's mixin
 * reads them.
 *
 * Why both: a record about a task is often made during another task's step (a `cancel:request`
 * made by the task that cancels), so records read the fields from the task they are about, through
 * its contexts; code the task calls that leaves its steps (an `async` function awaited with `until`)
 * has only the async context, so a task spawned with fields runs in one of its own, which holds
 * them in an `AsyncLocalStorage` of Keel's.
 *
 * Cost: nothing for a task spawned without fields. For one with: the merged fields, one context
 * entry and one captured async context (an `AsyncResource`) at its spawn; nothing per step.
 * @module
 */
import { invalidType } from "../errors.js";
import { type AsyncContext, captureAsyncContext, createHostStorage } from "./async-context.js";
import type { ContextValues } from "./context-values.js";
import { currentTask, taskOf } from "./current.js";
import { nameOf, type Op, type Operation } from "./operation.js";
import { spawnInto } from "./spawn-into.js";
import { emittingTask, runningTask, type Task, type TaskImpl } from "./task.js";

/**
 * Fields for log records: names to values a log line can print (strings, numbers, booleans).
 *
 * @example
 * ```ts
 * import { type LogFields, type LogRecord, run, spawn } from "@keel/core";
 * const fields: LogFields = { queue: "mail", jobId: "m1", attempt: 1 };
 * const records: LogRecord[] = [];
 * await run(function* () {
 *   yield* yield* spawn(function* send() {}, { logFields: fields });
 * }, { logger: (r) => records.push(r), logEvents: "debug" });
 * const start = records.find((r) => r.path?.includes("send#"))!;
 * console.log(start.event, start.fields.jobId); // task:start m1
 * ```
 */
export type LogFields = Readonly<Record<string, unknown>>;

/** The context key a task's log fields are stored under. */
export const LOG_FIELDS_KEY: unique symbol = Symbol.for("keel.log-fields");

/** @internal The fields of a task spawned without any (shared). */
export const NO_FIELDS: LogFields = Object.freeze({});

/** Keel's own storage: its store is the fields of the task whose step (or callback) runs. */
const storage = createHostStorage<LogFields>();

/** @internal The fields in force at the top of `task`'s stack (shared: not to be changed). */
export function fieldsOf(task: TaskImpl<unknown>): LogFields {
  // A settled task keeps no frame (its `task:settle` is made after), only what it was spawned with.
  const contexts = task.isSettled ? task.rootContextValues : task.contextsNow();
  return (contexts[LOG_FIELDS_KEY] as LogFields | undefined) ?? NO_FIELDS;
}

/** @internal The fields of the record being made now: those of the task it is about. */
export function recordFields(): LogFields {
  const task = emittingTask() ?? runningTask();
  return task ? fieldsOf(task) : (storage?.getStore() ?? NO_FIELDS);
}

/**
 * The log fields in force where it is called, as a new object: inside a task's step, its task's;
 * while Keel hands a record to its logger, those of the task the record is about; in code called
 * from a step that runs on after it (a promise's callbacks, an `async` function), those of the task
 * whose step started it (through the host's async context, on Node). An empty object elsewhere.
 *
 * Made for a logger's mixin, so that lines written by the application inside a worker's job carry
 * the job's `queue`, `jobId` and `attempt` as Keel's own records do. A new object each call: pino's
 * default mixin merge writes the line's own fields into the object the mixin returns.
 *
 * @example
 * ```ts
 * import { logFields, run, spawn } from "@keel/core";
 * import pino from "pino";
 * const log = pino({ mixin: () => logFields() });
 * await run(function* () {
 *   const job = yield* spawn(function* handler() {
 *     log.info("sending"); // {"level":30,…,"jobId":"m1","msg":"sending"}
 *     return logFields();
 *   }, { logFields: { jobId: "m1" } });
 *   console.log(yield* job); // { jobId: "m1" }
 * });
 * ```
 */
export function logFields(): Record<string, unknown> {
  return { ...recordFields() };
}

/**
 * Options of `spawn` and `scope.spawn` (here beside the log fields, its one option besides the name).
 *
 * @example
 * ```ts
 * import { logFields, run, type SpawnOptions, spawn } from "@keel/core";
 * const options: SpawnOptions = { name: "mail/m1", logFields: { queue: "mail", jobId: "m1" } };
 * const seen = await run(function* () {
 *   return yield* yield* spawn(function* () { return logFields(); }, options);
 * });
 * console.log(seen); // { queue: "mail", jobId: "m1" }
 * ```
 */
export interface SpawnOptions {
  /** The child's name in the tree and in events (default: the generator function's name). */
  name?: string;
  /**
   * Fields every log record about the child, or a task under it, carries (over those of its
   * parent, which it inherits), and that {@link logFields} returns in its steps and in the code they
   * call, promise code included (on Node: the child runs in an async context of its own). A worker
   * spawns each delivery with `{ queue, jobId, attempt }`.
   */
  logFields?: LogFields;
}

/** @internal Checks `spawn`'s `logFields` option, naming `parameter` in the error. */
export function checkLogFields(parameter: string, fields: unknown): LogFields | undefined {
  if (fields === undefined) return undefined;
  if (typeof fields !== "object" || fields === null || Array.isArray(fields))
    throw invalidType(parameter, "an object of fields", fields);
  return fields as LogFields;
}

/**
 * @internal The contexts and async context of a child spawned with `fields`: its parent's fields
 * with `fields` over them, in one new context entry, and the async context in force here with
 * those fields as Keel's store (on a host without one, its parent's).
 */
export function childWithFields(
  contexts: ContextValues,
  fields: LogFields,
): { contexts: ContextValues; asyncContext: AsyncContext | undefined } {
  const outer = contexts[LOG_FIELDS_KEY] as LogFields | undefined;
  // Kept as given when there is nothing to merge (a worker's delivery): read, never written.
  const merged: LogFields = outer ? { ...outer, ...fields } : fields;
  // A plain store, not `Object.create` with a descriptor (parsed per call): the same entry.
  const own: ContextValues = Object.create(contexts);
  own[LOG_FIELDS_KEY] = merged;
  return {
    contexts: own,
    asyncContext: storage ? storage.run(merged, captureAsyncContext) : undefined,
  };
}

/**
 * @internal A spawn with log fields: a class apart (one spawn per job uses it), so the plain spawn's
 * stays as it is; like it, its own iterator and iterator result inside a task's step (no generator
 * per job).
 */
export class SpawnWithFields<T>
  implements Operation<Task<T>>, Iterator<unknown, Task<T>, unknown>, IteratorReturnResult<Task<T>>
{
  readonly done = true;
  value: Task<T> = null as unknown as Task<T>;
  constructor(
    private readonly op: Op<T>,
    private readonly name: string | undefined,
    private readonly fields: LogFields,
  ) {}
  [Symbol.iterator](): Iterator<unknown, Task<T>, unknown> {
    return runningTask() ? this : spawnWithFieldsAsking(this.op, this.name, this.fields);
  }
  next(): IteratorResult<unknown, Task<T>> {
    this.value = spawnWithFieldsIn(taskOf(runningTask(), "spawn(op)"), this.op, this.name, this.fields);
    return this;
  }
}

function spawnWithFieldsIn<T>(
  task: TaskImpl<unknown>,
  op: Op<T>,
  name: string | undefined,
  fields: LogFields,
): Task<T> {
  task.checkpoint();
  const frame = task.top;
  return spawnInto(frame, op, name ?? nameOf(op, "task"), childWithFields(frame.contexts, fields));
}

/** Driven from outside a task's step: asks for the task first. */
function* spawnWithFieldsAsking<T>(
  op: Op<T>,
  name: string | undefined,
  fields: LogFields,
): Generator<unknown, Task<T>, unknown> {
  return spawnWithFieldsIn(yield* currentTask("spawn(op)"), op, name, fields);
}

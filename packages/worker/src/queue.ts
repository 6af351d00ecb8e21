/**
 * `Queue`: what `createMemoryQueue` and `useBullQueue` hand back, the same for every engine; `add`
 * checks and normalizes its options here, once, before any engine sees them.
 * @module
 */
import { emitEvent, eventsWanted, now, type Operation } from "@keel/core";
import { checkKeys, checkMs, checkObject, checkWhole, invalidRange, invalidType } from "./checks.js";
import type { AddResult, DeadLetter, EngineCounts, QueueEngine } from "./engine.js";
import { Bound } from "./op.js";

/**
 * How a job is added. Give `deadlineAt` (absolute, on the runtime's clock) or `ttlMs` (from now),
 * not both.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { type AddOptions, createMemoryQueue } from "@keel/worker";
 * const options: AddOptions = { id: "invoice-42", ttlMs: 60_000, attempts: 3, priority: 1, delayMs: 500 };
 * const r = await run(function* () {
 *   const queue = yield* createMemoryQueue<{ invoice: number }>({ name: "invoices" });
 *   return yield* queue.add({ invoice: 42 }, options);
 * });
 * console.log(r); // { id: "invoice-42", added: true, state: "delayed" }
 * ```
 */
export interface AddOptions {
  /**
   * An idempotency key: adding an id the queue holds (waiting, delayed, active) or has ended
   * (completed, dead-lettered) adds nothing, and the result says where that job stands.
   */
  id?: string;
  /** The job's deadline, absolute on the runtime's clock; past it the job is dead-lettered as `expired`. */
  deadlineAt?: number;
  /** The job's deadline, counted from now. */
  ttlMs?: number;
  /** The job's own attempt limit (default: the worker's `retry.attempts`). */
  attempts?: number;
  /** Lower runs first; 0 (the default) before any other. */
  priority?: number;
  /** Not delivered before this long from now. */
  delayMs?: number;
}

/**
 * A job queue over an engine: add jobs, read its counts and dead letters; `useWorker` runs its jobs.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createMemoryQueue, type Queue } from "@keel/worker";
 * const counts = await run(function* () {
 *   const queue: Queue<string> = yield* createMemoryQueue<string>({ name: "mail" });
 *   yield* queue.add("hello");
 *   return yield* queue.counts();
 * });
 * console.log(counts.waiting); // 1
 * ```
 */
export interface Queue<T> {
  readonly name: string;
  /** Adds a job; `added: false` when its `id` is already taken (held or ended), with that job's state. */
  add(data: T, options?: AddOptions): Operation<AddResult>;
  counts(): Operation<EngineCounts>;
  deadLetters(): Operation<readonly DeadLetter<T>[]>;
  /** The engine underneath, for `useWorker` and for engines' own tests. */
  readonly engine: QueueEngine<T>;
}

const ADD_KEYS = ["id", "deadlineAt", "ttlMs", "attempts", "priority", "delayMs"] as const;

/** The queue over `engine`, with `add`'s checks. */
export function queueOver<T>(engine: QueueEngine<T>): Queue<T> {
  const where = `queue(${engine.name}).add(data, options)`;
  const whereOptions = `${where} options`;
  return {
    name: engine.name,
    engine,
    counts: () => engine.counts(),
    deadLetters: () => engine.deadLetters(),
    add(data: T, options: AddOptions = {}): Operation<AddResult> {
      const o = checkObject(whereOptions, options);
      checkKeys(whereOptions, o, ADD_KEYS);
      if (options.id !== undefined && (typeof options.id !== "string" || options.id === ""))
        throw invalidType(`${where} { id }`, "a non-empty string", options.id);
      if (options.deadlineAt !== undefined && options.ttlMs !== undefined)
        throw invalidRange(`${where} { deadlineAt, ttlMs }`, "one of deadlineAt or ttlMs, not both", "both");
      if (
        options.deadlineAt !== undefined &&
        (typeof options.deadlineAt !== "number" || Number.isNaN(options.deadlineAt))
      )
        throw invalidRange(
          `${where} { deadlineAt }`,
          "an instant on the runtime's clock (a number)",
          options.deadlineAt,
        );
      if (options.ttlMs !== undefined) checkMs(`${where} { ttlMs }`, options.ttlMs);
      if (options.attempts !== undefined) checkWhole(`${where} { attempts }`, options.attempts, 1);
      if (options.priority !== undefined) checkWhole(`${where} { priority }`, options.priority, 0);
      if (options.delayMs !== undefined)
        checkMs(`${where} { delayMs }`, options.delayMs, { allowInfinity: false });
      return new Bound(addWithDeadline<T>, engine, data, options);
    },
  };
}

/**
 * `add`'s run: the deadline from `ttlMs` counts from now, on the runtime's clock; a tracer listening
 * (`worker:add`) stores the adding task's trace context with the job.
 */
function* addWithDeadline<T>(
  engine: QueueEngine<T>,
  data: T,
  options: AddOptions,
): Generator<unknown, AddResult, unknown> {
  const at = yield* now();
  const deadlineAt = options.deadlineAt ?? (options.ttlMs === undefined ? Infinity : at + options.ttlMs);
  const trace = (yield* eventsWanted()) ? yield* traceOfAdd(engine.name, options.id) : undefined;
  return yield* engine.add(data, {
    id: options.id,
    deadlineAt,
    attempts: options.attempts,
    priority: options.priority ?? 0,
    delayMs: options.delayMs ?? 0,
    ...(trace ? { trace } : {}),
  });
}

/** What `worker:add`'s listeners stored with `setTrace` (undefined when nothing). */
function* traceOfAdd(
  queue: string,
  jobId: string | undefined,
): Generator<unknown, Record<string, string> | undefined, unknown> {
  let trace: Record<string, string> | undefined;
  let open = true;
  const setTrace = (name: string, value: string): void => {
    if (typeof name !== "string" || typeof value !== "string")
      throw invalidType(
        "worker:add event's setTrace(name, value)",
        "two strings",
        typeof name === "string" ? value : name,
      );
    if (!open)
      throw new RangeError(`worker:add event's setTrace(${name}): only while the event is delivered`);
    (trace ??= {})[name] = value;
  };
  yield* emitEvent({ type: "worker:add", queue, ...(jobId === undefined ? {} : { jobId }), setTrace });
  open = false;
  return trace;
}

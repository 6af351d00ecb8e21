/**
 * The table of events the runtime emits (semantics §9), as one typed union.
 * @module
 */
import type { CancelReason, ScopeInfo } from "../kernel/cancelled.js";

interface Base {
  /** The clock's time when it happened. */
  readonly at: number;
  readonly taskId: number;
  /** The task's path from its root: `main#1/handler#4`. */
  readonly path: string;
  /** The id of the task's root (the `run` or `main` task): tells concurrent runs apart. */
  readonly rootId: number;
}

/**
 * Everything the runtime reports; `type` tells which.
 *
 * @example
 * ```ts
 * import { type KeelEvent, run, sleep } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const events: KeelEvent[] = [];
 * await run(function* job() { yield* sleep(5); }, { clock: createVirtualClock(), onEvent: (e) => events.push(e) });
 * for (const e of events) {
 *   if (e.type === "task:settle") console.log(e.state, e.at); // `type` narrows the union: completed 5
 * }
 * console.log(events.map((e) => e.type)); // ["task:start", "task:settle"]
 * ```
 */
export type KeelEvent =
  | (Base & {
      readonly type: "task:start";
      readonly name: string;
      readonly parentId: number | null;
      /** What was left of the deadline the task inherited, at its start (`Infinity` when none). */
      readonly deadlineLeftMs: number;
      /**
       * Present (true) for a task that lives as long as its scope rather than for one piece of
       * work: a resource's task, and `main`'s root (the process). Tracers give it no span of its own.
       */
      readonly longLived?: true;
    })
  | (Base & {
      readonly type: "task:settle";
      readonly state: "completed" | "failed" | "cancelled";
      readonly error?: unknown;
      readonly reason?: CancelReason;
    })
  | (Base & {
      readonly type: "cancel:request";
      readonly reason: CancelReason;
      readonly owner: ScopeInfo | "outside";
    })
  | (Base & {
      readonly type: "timeout:fire";
      readonly scope: ScopeInfo;
      readonly timeoutMs: number;
      readonly deadline: number;
    })
  | (Base & { readonly type: "timeout:superseded"; readonly scope: ScopeInfo })
  // A `timeout`/`timeoutAt` scope (and a retry's budget or per-attempt timeout) entered and left;
  // the runtime's internal limits (HTTP phases, shields) report through their own events instead.
  | (Base & {
      readonly type: "timeout:start";
      readonly scope: ScopeInfo;
      readonly timeoutMs: number;
      readonly deadline: number;
      /** What is left of the effective deadline inside the scope (its own or an earlier one). */
      readonly deadlineLeftMs: number;
    })
  | (Base & {
      readonly type: "timeout:end";
      readonly scope: ScopeInfo;
      /** Its timer fired and asked its region to stop. */
      readonly fired: boolean;
      /** `timed-out`: the scope threw its own `TimeoutError`. */
      readonly outcome: "completed" | "timed-out" | "failed" | "cancelled";
      readonly elapsedMs: number;
      /** What the scope threw, for `timed-out` (its `TimeoutError`) and `failed`. */
      readonly error?: unknown;
    })
  | (Base & {
      readonly type: "cleanup:overrun";
      readonly budgetMs: number;
      readonly waitingOn: string | null;
    })
  | (Base & {
      readonly type: "cleanup:swallow";
      readonly scope: ScopeInfo | null;
      readonly reason: CancelReason;
    })
  | (Base & { readonly type: "cleanup:abandon"; readonly waitingOn: string | null })
  | (Base & { readonly type: "shield:delay"; readonly delayedMs: number; readonly reason: CancelReason })
  | (Base & {
      readonly type: "error:suppressed";
      readonly error: unknown;
      readonly primary: unknown;
      readonly context: string;
    })
  | (Base & { readonly type: "cancel:replaced"; readonly error: unknown; readonly reason: CancelReason })
  | (Base & {
      readonly type: "retry:start";
      readonly label: string;
      /** The most attempts the policy allows. */
      readonly attempts: number;
      readonly budgetMs: number | null;
      readonly perAttemptMs: number | null;
      /** What is left of the deadline in force where the retry starts (`Infinity` when none). */
      readonly deadlineLeftMs: number;
    })
  | (Base & {
      readonly type: "retry:attempt";
      readonly attempt: number;
      /** The most attempts the policy allows (N in "attempt k of N"). */
      readonly attempts: number;
      readonly label: string;
      /** What is left of the deadline in force as the attempt starts (`Infinity` when none). */
      readonly deadlineLeftMs: number;
    })
  | (Base & { readonly type: "retry:success"; readonly attempt: number; readonly label: string })
  | (Base & {
      readonly type: "retry:sleep";
      readonly attempt: number;
      readonly delayMs: number;
      readonly delayReason: "backoff" | "retry-after";
      readonly error: unknown;
    })
  | (Base & {
      readonly type: "retry:giveup";
      readonly attempt: number;
      readonly reason: "attempts" | "budget" | "deadline" | "not-retryable";
      readonly delayMs: number | null;
      readonly error: unknown;
    })
  | (Base & {
      readonly type: "retry:end";
      readonly label: string;
      /** Attempts started. */
      readonly attempt: number;
      /** `failed`: an error that was not retried (or a policy callback's own) ended it. */
      readonly outcome: "success" | "giveup" | "failed" | "cancelled";
      /** What it threw, unless it succeeded. */
      readonly error?: unknown;
    })
  | (Base & {
      readonly type: "retry:unreachable";
      readonly perAttemptMs: number;
      readonly availableMs: number;
      readonly attempts: number;
      readonly message: string;
    })
  | (Base & {
      readonly type: "http:request";
      readonly method: string;
      readonly url: string;
      /** What is left of the deadline the attempt runs under, its total included (`Infinity` when none). */
      readonly deadlineLeftMs: number;
      /**
       * Adds a header to this attempt (`traceparent`); callable only while the event is delivered,
       * which is before the request is sent (as undici's `undici:request:create` `addHeader`).
       */
      readonly setHeader: (name: string, value: string) => void;
      /**
       * Runs the request's dispatch inside `scope` (which must call its argument once, at once):
       * for an observer whose async context other subscribers of undici's `undici:request:create`
       * read (OpenTelemetry's active context, for its undici instrumentation). Callable only while
       * the event is delivered; the last call wins.
       */
      readonly dispatchWithin: (scope: (dispatch: () => void) => void) => void;
    })
  | (Base & {
      readonly type: "http:error";
      readonly method: string;
      readonly url: string;
      /** Why the attempt ended before a response was handed over: an `HttpError`, a timeout, a refused connection, a `Cancelled`. */
      readonly error: unknown;
      readonly elapsedMs: number;
    })
  | (Base & {
      readonly type: "http:connect";
      readonly method: string;
      readonly url: string;
      readonly elapsedMs: number;
    })
  | (Base & {
      readonly type: "http:headers";
      readonly method: string;
      readonly url: string;
      readonly status: number;
      readonly elapsedMs: number;
    })
  | (Base & {
      readonly type: "http:body";
      readonly method: string;
      readonly url: string;
      readonly bytes: number;
      readonly elapsedMs: number;
    })
  | (Base & {
      readonly type: "http:timeout";
      readonly method: string;
      readonly url: string;
      readonly phase: string;
      readonly timeoutMs: number;
    })
  | (Base & {
      readonly type: "breaker:state";
      readonly name: string;
      readonly from: string;
      readonly to: string;
    })
  // Queues of the resilience layer: emitted only on the waiting path (a semaphore or limiter that
  // grants at once reports nothing), and a channel's depth after each send and receive.
  | (Base & { readonly type: "semaphore:wait"; readonly name: string; readonly waiting: number })
  | (Base & {
      readonly type: "semaphore:acquire";
      readonly name: string;
      readonly waitedMs: number;
      readonly waiting: number;
    })
  | (Base & { readonly type: "limiter:wait"; readonly name: string; readonly waiting: number })
  | (Base & {
      readonly type: "limiter:acquire";
      readonly name: string;
      readonly waitedMs: number;
      readonly waiting: number;
    })
  | (Base & {
      readonly type: "channel:depth";
      readonly name: string;
      readonly op: "send" | "receive";
      readonly size: number;
      readonly capacity: number;
      readonly senders: number;
      readonly receivers: number;
    })
  // @keel/worker (emitted through `emitEvent`): one event per job transition, and the shutdown's steps.
  | (Base & {
      readonly type: "worker:job";
      readonly queue: string;
      readonly jobId: string;
      readonly attempt: number;
      /**
       * `stalled`: the worker could not record the job's outcome (its lock was lost, or the engine
       * did not answer within `engineTimeoutMs`). It ends the delivery, not the job: the engine's
       * own recovery ends it (a call that lands late) or redelivers it (BullMQ's stalled check).
       */
      readonly transition: "start" | "complete" | "retry" | "dead-letter" | "release" | "stalled";
      /**
       * For `start`: the trace context the job was added with (`traceparent`, `tracestate`), when it
       * carries one: written by `worker:add`'s `setTrace`, or by a plain BullMQ producer's telemetry.
       */
      readonly trace?: Readonly<Record<string, string>>;
      /** For `start`: the most attempts the job may have (N in "attempt k of N"). */
      readonly attempts?: number;
      /** For `start`: what is left of the attempt's deadline (the job's, or the worker's `timeoutMs`). */
      readonly deadlineLeftMs?: number;
      /**
       * For `dead-letter`: `expired`, `exhausted`, `rejected`, `stalled` or `abandoned`; for `retry`:
       * `error` or `stalled`; for `stalled`: `lock-lost` or `engine-down`.
       */
      readonly reason?: string;
      readonly delayMs?: number;
      readonly durationMs?: number;
      readonly error?: unknown;
    })
  // A job is being added (`queue.add`), in the adding task: `setTrace` stores a trace context with
  // the job (as `http:request`'s `setHeader` adds a header), which its deliveries carry on `start`.
  | (Base & {
      readonly type: "worker:add";
      readonly queue: string;
      /** The job's id when the caller gave one. */
      readonly jobId?: string;
      /** Stores a field of trace context with the job; callable only while the event is delivered. */
      readonly setTrace: (name: string, value: string) => void;
    })
  // The worker's engine stopped answering (`down`: a call failed or timed out; the worker stops
  // taking) or answers again (`up`); a warning by default.
  | (Base & {
      readonly type: "worker:engine";
      readonly queue: string;
      readonly state: "down" | "up";
      /** What happened, in words (the warning's text). */
      readonly message: string;
      /** For `down`: the failure that showed it (a timeout, a connection error). */
      readonly error?: unknown;
      /** For `up`: how long it was down. */
      readonly downForMs?: number;
    })
  | (Base & {
      readonly type: "worker:shutdown";
      readonly queue: string;
      readonly phase: "stop" | "drained" | "cut" | "closed" | "close-timeout";
      readonly inFlight: number;
      readonly released: number;
    })
  // @keel/workflow (emitted through `emitEvent`): an execution's runs in a process, and its steps.
  | (Base & {
      readonly type: "workflow:execution";
      readonly workflow: string;
      readonly executionId: string;
      /**
       * `run`: claimed, its body started (replaying `replayed` journal entries first); `park`: quiet
       * on a durable wait, evicted until `waitingOn` is due; `complete`, `fail`, `cancel`: ended;
       * `hand-back`: released at a shutdown; `lost`: its claim was lost (another process has it).
       */
      readonly transition: "run" | "park" | "complete" | "fail" | "cancel" | "hand-back" | "lost";
      readonly replayed?: number;
      readonly waitingOn?: string;
      readonly error?: unknown;
    })
  | (Base & {
      readonly type: "workflow:step";
      readonly workflow: string;
      readonly executionId: string;
      /** The step's journal key without its kind: `charge#1`, `0.1/charge#1` in a spawned branch. */
      readonly key: string;
      /** `start`: its operation starts; `end`: its outcome is journaled; `replay`: taken from the journal. */
      readonly transition: "start" | "end" | "replay";
      readonly ok?: boolean;
      /** For `end`: how many times its operation ran (retries included). */
      readonly attempts?: number;
      readonly durationMs?: number;
      readonly error?: unknown;
    })
  // A workflow engine's store stopped answering (`down`: a claim failed; the engine keeps trying
  // every `pollMs`) or answers again (`up`); a warning by default.
  | (Base & {
      readonly type: "workflow:store";
      readonly store: string;
      readonly state: "down" | "up";
      readonly message: string;
      readonly error?: unknown;
      readonly downForMs?: number;
    })
  // Diagnosis (issue 13): a step that held the event loop (`main`'s `blockedStepMs`), and an external
  // call made with no deadline anywhere above it (`warnNoDeadline`).
  | (Base & { readonly type: "task:blocked"; readonly durationMs: number; readonly thresholdMs: number })
  | (Base & {
      readonly type: "deadline:missing";
      /** `http` for a request, `job` for a worker job's handler. */
      readonly call: "http" | "job";
      /** What was called: `GET /orders`, `mail/m1 attempt 1/3`. */
      readonly label: string;
    });

/**
 * The `type` of each event.
 *
 * @example
 * ```ts
 * import { type KeelEventType, run, sleep, timeout } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const counts = new Map<KeelEventType, number>();
 * await run(function* () {
 *   try { yield* timeout(10, sleep(100)); } catch {}
 * }, { clock: createVirtualClock(), onEvent: (e) => counts.set(e.type, (counts.get(e.type) ?? 0) + 1) });
 * // { "task:start": 1, "timeout:start": 1, "timeout:fire": 1, "cancel:request": 1, "timeout:end": 1, "task:settle": 1 }
 * console.log(Object.fromEntries(counts));
 * ```
 */
export type KeelEventType = KeelEvent["type"];

/** Event types that are warnings by default (printed when nobody listens). */
export const warningEvents: ReadonlySet<KeelEventType> = new Set([
  "cleanup:overrun",
  "cleanup:swallow",
  "cleanup:abandon",
  "cancel:replaced",
  "error:suppressed",
  "retry:unreachable",
  "task:blocked",
  "deadline:missing",
  "worker:engine",
  "workflow:store",
]);

/**
 * The `node:diagnostics_channel` channel each event family is also published on, by the family
 * (the `type` before its colon). A channel's message is the event itself, the same object `onEvent`
 * receives; nothing is built for a channel nobody subscribes to.
 *
 * @example
 * ```ts
 * import { subscribe, unsubscribe } from "node:diagnostics_channel";
 * import { KEEL_CHANNELS, type KeelEvent, run, sleep } from "@keel/core";
 * const starts: string[] = [];
 * const onTask = (message: unknown) => {
 *   const e = message as KeelEvent;
 *   if (e.type === "task:start") starts.push(e.path.replace(/#\d+/g, ""));
 * };
 * subscribe(KEEL_CHANNELS.task, onTask);
 * await run(function* job() { yield* sleep(1); });
 * unsubscribe(KEEL_CHANNELS.task, onTask);
 * console.log(KEEL_CHANNELS.task, starts); // keel:task ["job"]
 * ```
 */
export const KEEL_CHANNELS = {
  task: "keel:task",
  cancel: "keel:cancel",
  timeout: "keel:timeout",
  cleanup: "keel:cleanup",
  shield: "keel:shield",
  error: "keel:error",
  retry: "keel:retry",
  http: "keel:http",
  breaker: "keel:breaker",
  semaphore: "keel:semaphore",
  limiter: "keel:limiter",
  channel: "keel:channel",
  worker: "keel:worker",
  workflow: "keel:workflow",
  deadline: "keel:deadline",
} as const;

/** The fields an emitter supplies; the task adds `at`, `taskId`, `path` and `rootId`. */
export type KeelEventInput = KeelEvent extends infer E
  ? E extends KeelEvent
    ? Omit<E, keyof Base>
    : never
  : never;

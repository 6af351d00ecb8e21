/**
 * The store contract: where executions and their journals live. Every store (in-memory, PostgreSQL,
 * SQLite) passes the same contract suite (`test/store-contract.ts`).
 *
 * Invariants every store keeps:
 * - An execution is **claimed** by one owner at a time. `claim` takes only executions that are
 *   runnable and not leased (no owner, or a lease that ended before `nowMs`), sets the owner, the
 *   lease's end and a new `generation` (a fencing token: every write of the claim names it, and a
 *   write whose generation is not the current one fails with `LeaseLostError`, so a process that lost
 *   its lease cannot write after another took over).
 * - A journal entry is written once: `append` of a key the journal holds fails with
 *   `LeaseLostError` only if the lease was lost, else it is a `DuplicateEntryError` (a bug of the
 *   engine, never of the user's code).
 * - Times are milliseconds on the engine's clock, given by the caller (`nowMs`): stores never read
 *   the host's clock, so the virtual clock drives them in tests.
 * - Values are JSON (`JsonValue`): the engine checks and copies them before they reach a store.
 * @module
 */

/**
 * A JSON value: what a journal can hold (rule W9). The engine checks and copies every value before
 * it reaches a store: a value that is not plain JSON, or would not come back the same, is refused
 * with `NotJournalableError`.
 *
 * @example
 * ```ts
 * import type { JsonValue } from "@keel/workflow";
 * const order: JsonValue = { id: "order-7", lines: [{ sku: "A-1", qty: 2 }], paidAt: "2026-12-06T10:00:00.000Z", gift: null };
 * console.log(JSON.stringify(order).length > 0); // true
 * ```
 */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/**
 * Where an execution is.
 * - `pending`: created or woken, waiting for a process to claim it.
 * - `running`: claimed by a process (see `owner`).
 * - `sleeping` / `waiting`: parked on a durable sleep / an event (`wakeAt` says when it is due
 *   anyway: the sleep's end, the event's timeout, or null for an event with no timeout).
 * - `completed` / `failed` / `cancelled`: ended; `output` or `error` holds the outcome.
 *
 * @example
 * ```ts
 * import type { ExecutionStatus } from "@keel/workflow";
 * const parked: ExecutionStatus[] = ["sleeping", "waiting"];
 * const ended = (s: ExecutionStatus) => s === "completed" || s === "failed" || s === "cancelled";
 * console.log(parked.some(ended), ended("cancelled")); // false true
 * ```
 */
export type ExecutionStatus =
  | "pending"
  | "running"
  | "sleeping"
  | "waiting"
  | "completed"
  | "failed"
  | "cancelled";

/** The statuses an execution ends in: it never leaves them. */
export const ENDED_STATUSES: readonly ExecutionStatus[] = ["completed", "failed", "cancelled"];

/**
 * An error as the journal keeps it: enough to throw the same error again on replay (rule W3). On a
 * replay, and on the first run too, the body gets an `Error` rebuilt from it: its name, message,
 * code, stack and `data` as own properties, and its cause (not its class).
 *
 * @example
 * ```ts
 * import type { JournaledError } from "@keel/workflow";
 * const declined: JournaledError = {
 *   name: "HttpError",
 *   message: "POST /charges: 402 Payment Required",
 *   code: "KEEL_HTTP_STATUS",
 *   data: { status: 402, retryable: false },
 * };
 * console.log(declined.data?.status); // 402
 * ```
 */
export interface JournaledError {
  /** The error's `name` (`TypeError`, `HttpError`). */
  readonly name: string;
  /** The error's `message`. */
  readonly message: string;
  /** The error's `code`, when it had a string one (`KEEL_TIMEOUT`). */
  readonly code?: string;
  /** The error's `stack`, as it was where it was thrown. */
  readonly stack?: string;
  /** The error's own enumerable properties that are JSON (`status`, `retryable`, ...). */
  readonly data?: { readonly [key: string]: JsonValue };
  /** The error's `cause`, journaled the same way (three levels deep at most). */
  readonly cause?: JournaledError;
}

/**
 * An execution as the store keeps it: one row, whatever the length of its journal. `engine.get`
 * reads it with its journal into an `ExecutionView`; `engine.list` returns records.
 *
 * @example
 * ```ts
 * import { createMemoryStore, type ExecutionRecord } from "@keel/workflow";
 * const store = createMemoryStore();
 * await store.init();
 * const { record } = await store.create({ id: "order-7", workflow: "checkout", version: 1, input: { cents: 4200 }, deadlineAt: null, nowMs: 0 });
 * const shown: ExecutionRecord = record;
 * console.log(shown.status, shown.generation, shown.owner); // pending 0 null
 * ```
 */
export interface ExecutionRecord {
  /** The execution's id, unique in its store. */
  readonly id: string;
  /** The name of its workflow. */
  readonly workflow: string;
  /** The definition's version when the execution started (see `workflow(name, { version })`). */
  readonly version: number;
  /** The input it started with, as the engine journals it: `[input]`, or null when it was `undefined`. */
  readonly input: JsonValue;
  /** Where it is: see {@link ExecutionStatus}. */
  readonly status: ExecutionStatus;
  /** When it was created (ms on the engine's clock). */
  readonly createdAt: number;
  /** When its row last changed. */
  readonly updatedAt: number;
  /** The execution's absolute deadline, or null for none. */
  readonly deadlineAt: number | null;
  /** For a parked execution: when it is due anyway (a sleep's end, an event's timeout); else null. */
  readonly wakeAt: number | null;
  /** For a parked execution: the event names it waits for (empty for a sleep). */
  readonly waitingFor: readonly string[];
  /** What it waits on, for people: `sleep until 2026-12-06T10:00:00.000Z`, `event "approved"`. */
  readonly waitingOn: string | null;
  /** The process whose claim it is under (`WorkflowEngineOptions.owner`), or null. */
  readonly owner: string | null;
  /** When the current claim ends unless renewed; null when not claimed. */
  readonly leaseUntil: number | null;
  /** Bumped by every claim: the fencing token of the current claim. */
  readonly generation: number;
  /** Set by `requestCancel`: the reason; the execution is runnable until it ends. */
  readonly cancelRequested: string | null;
  /** For a `completed` execution, its result as journaled; else null. */
  readonly output: JsonValue | null;
  /** For a `failed` or `cancelled` execution, its error; else null. */
  readonly error: JournaledError | null;
  /** When it ended; null until then. */
  readonly endedAt: number | null;
}

/**
 * What `WorkflowStore.create` is given: the engine's `start` builds it from the definition, the
 * checked input and the options.
 *
 * @example
 * ```ts
 * import { createMemoryStore, type NewExecution } from "@keel/workflow";
 * const store = createMemoryStore();
 * await store.init();
 * const execution: NewExecution = { id: "order-7", workflow: "checkout", version: 1, input: [{ cents: 4200 }], deadlineAt: 86_400_000, nowMs: 0 };
 * const first = await store.create(execution);
 * const again = await store.create({ ...execution, input: null });
 * console.log(first.created, again.created, again.record.input); // true false [ { cents: 4200 } ]
 * ```
 */
export interface NewExecution {
  /** The execution's id: an id the store has is left as it is. */
  readonly id: string;
  /** The workflow's name. */
  readonly workflow: string;
  /** The definition's version. */
  readonly version: number;
  /** The input, checked and journaled. */
  readonly input: JsonValue;
  /** The absolute deadline, or null. */
  readonly deadlineAt: number | null;
  /** Now, on the engine's clock. */
  readonly nowMs: number;
  /**
   * Creates it already claimed, as `claim` would have (`running`, this owner, a lease until
   * `nowMs + leaseMs`, generation 1): the engine's `start` runs what it can at once, with no claim
   * to wait for. An id that exists is left as it is, claimed by no one new.
   */
  readonly claim?: { readonly owner: string; readonly leaseMs: number };
}

/**
 * One journal entry: the outcome of a step, the instant of a durable sleep, an event taken or
 * timed out, a `now()` or `random()` read, a `patched()` answer. Written once (a key is never
 * rewritten), under the claim that made it.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createMemoryStore, type JournalEntry, startWorkflowEngine, step, workflow } from "@keel/workflow";
 * const w = workflow("one-step", function* () {
 *   return yield* step("charge", function* () { return "ch_1"; });
 * });
 * await run(function* () {
 *   const engine = yield* startWorkflowEngine({ store: createMemoryStore(), workflows: [w] });
 *   yield* engine.start(w, null, { id: "j-1" });
 *   yield* engine.result("j-1");
 *   const [entry]: JournalEntry[] = yield* engine.journal("j-1");
 *   console.log(entry?.key, entry?.kind, entry?.ok, entry?.value, entry?.attempts); // step:charge#1 step true [ 'ch_1' ] 1
 * });
 * ```
 */
export interface JournalEntry {
  /** The entry's identity in its execution: `step:charge#1`, `sleep#2`, `event:approved#1`. */
  readonly key: string;
  /** What wrote it: a step, a sleep, an event wait, `now()`, `random()` or `patched()`. */
  readonly kind: "step" | "sleep" | "event" | "now" | "random" | "patch";
  /** False for an error outcome (a step that failed, an event wait that timed out). */
  readonly ok: boolean;
  /** The value (ok), or null. For a sleep: `{ wakeAt }`; for an event: `{ payload, signal }`. */
  readonly value: JsonValue;
  /** The error, when not `ok`; else null. */
  readonly error: JournaledError | null;
  /** How many times the step's operation ran (its retries included); 0 for other kinds. */
  readonly attempts: number;
  /** When it began (a step's start, a wait's first reach), on the engine's clock. */
  readonly startedAt: number;
  /** When its outcome was known. */
  readonly endedAt: number;
}

/**
 * A signal sent to an execution, kept until a wait takes it (rule W8). `seq` grows per execution
 * from 1: the waits for a name take its signals in `seq` order.
 *
 * @example
 * ```ts
 * import { createMemoryStore, type SignalRecord } from "@keel/workflow";
 * const store = createMemoryStore();
 * await store.init();
 * await store.create({ id: "order-7", workflow: "checkout", version: 1, input: null, deadlineAt: null, nowMs: 0 });
 * await store.signal("order-7", "approved", { by: "ops" }, 5);
 * const [s]: SignalRecord[] = await store.signals("order-7");
 * console.log(s?.seq, s?.name, s?.payload, s?.at); // 1 approved { by: 'ops' } 5
 * ```
 */
export interface SignalRecord {
  /** Its number in the execution, from 1. */
  readonly seq: number;
  /** The event's name (`waitForEvent(name)`). */
  readonly name: string;
  /** Its payload, journaled. */
  readonly payload: JsonValue;
  /** When it was sent. */
  readonly at: number;
}

/**
 * A claim's identity, named by every write made under it: a write whose generation is not the
 * execution's current one fails with `LeaseLostError` (the fencing token of rule W12).
 *
 * @example
 * ```ts
 * import { createMemoryStore, isLeaseLostError, type Lease } from "@keel/workflow";
 * const store = createMemoryStore();
 * await store.init();
 * await store.create({ id: "order-7", workflow: "checkout", version: 1, input: null, deadlineAt: null, nowMs: 0 });
 * const [mine] = await store.claim("worker-a", 0, 1_000, 1);
 * const lease: Lease = { owner: "worker-a", generation: mine!.record.generation };
 * await store.claim("worker-b", 5_000, 1_000, 1); // worker-a's lease ended at 1,000: worker-b takes over
 * const write = store.append("order-7", lease, []);
 * console.log(isLeaseLostError(await write.catch((e) => e))); // true
 * ```
 */
export interface Lease {
  /** The claiming process (`WorkflowEngineOptions.owner`). */
  readonly owner: string;
  /** The claim's generation (`ExecutionRecord.generation` when it was claimed). */
  readonly generation: number;
}

/**
 * An execution a process has claimed, with all it needs to replay: what `WorkflowStore.claim`
 * returns, one per execution.
 *
 * @example
 * ```ts
 * import { type Claimed, createMemoryStore } from "@keel/workflow";
 * const store = createMemoryStore();
 * await store.init();
 * await store.create({ id: "order-7", workflow: "checkout", version: 1, input: null, deadlineAt: null, nowMs: 0 });
 * const claimed: Claimed[] = await store.claim("worker-a", 0, 30_000, 10);
 * console.log(claimed.map((c) => [c.record.id, c.record.status, c.journal.length, c.signals.length]));
 * // [ [ 'order-7', 'running', 0, 0 ] ]
 * ```
 */
export interface Claimed {
  /** The execution's record, as the claim left it (`running`, this owner, a new generation). */
  readonly record: ExecutionRecord;
  /** Its journal, in the order written. */
  readonly journal: readonly JournalEntry[];
  /** Its signals, in `seq` order (those taken too: the journal says which). */
  readonly signals: readonly SignalRecord[];
}

/**
 * Which executions `engine.list` (and `WorkflowStore.list`) returns.
 *
 * @example
 * ```ts
 * import type { ListFilter } from "@keel/workflow";
 * const stuck: ListFilter = { status: ["sleeping", "waiting"], workflow: "checkout", limit: 50 };
 * console.log(stuck.status); // [ 'sleeping', 'waiting' ]
 * ```
 */
export interface ListFilter {
  /** Only executions in this status, or in one of these. */
  readonly status?: ExecutionStatus | readonly ExecutionStatus[];
  /** Only executions of the workflow of this name. */
  readonly workflow?: string;
  /** At most this many, newest first (default 100). */
  readonly limit?: number;
}

/**
 * How a claim parks its execution (rule W6): it gives up its lease and sleeps until `wakeAt` or a
 * signal. The engine parks a body that waits only durably with its next wake at least
 * `parkAfterMs` away; a store writes it in one update.
 *
 * @example
 * ```ts
 * import { createMemoryStore, type Park } from "@keel/workflow";
 * const store = createMemoryStore();
 * await store.init();
 * await store.create({ id: "order-7", workflow: "checkout", version: 1, input: null, deadlineAt: null, nowMs: 0 });
 * const [c] = await store.claim("worker-a", 0, 30_000, 1);
 * const park: Park = { status: "waiting", wakeAt: 172_800_000, waitingFor: ["approved"], waitingOn: 'event "approved"', signalsSeen: 0, nowMs: 10 };
 * await store.park("order-7", { owner: "worker-a", generation: c!.record.generation }, park);
 * const r = await store.get("order-7");
 * console.log(r?.status, r?.owner, r?.wakeAt); // waiting null 172800000
 * ```
 */
export interface Park {
  /** `waiting` when it waits for an event, else `sleeping`. */
  readonly status: "sleeping" | "waiting";
  /** When it is due anyway (a sleep's end, an event's timeout, the deadline), or null for never. */
  readonly wakeAt: number | null;
  /** The event names a signal for which makes it runnable. */
  readonly waitingFor: readonly string[];
  /** What it waits on, for people (`ExecutionRecord.waitingOn`). */
  readonly waitingOn: string;
  /**
   * The highest signal seq the claim had seen: a signal for one of `waitingFor` newer than this
   * leaves the execution `pending` (runnable) instead of parked, so no signal is slept through.
   */
  readonly signalsSeen: number;
  /** Now, on the engine's clock. */
  readonly nowMs: number;
}

/**
 * How a claim ends its execution: `completed` with its output, or `failed` / `cancelled` with its
 * error. A store writes it in one update, and the execution never leaves that status.
 *
 * @example
 * ```ts
 * import { createMemoryStore, type Finish } from "@keel/workflow";
 * const store = createMemoryStore();
 * await store.init();
 * await store.create({ id: "order-7", workflow: "checkout", version: 1, input: null, deadlineAt: null, nowMs: 0 });
 * const [c] = await store.claim("worker-a", 0, 30_000, 1);
 * const done: Finish = { status: "completed", output: ["shipped"], nowMs: 20 };
 * await store.finish("order-7", { owner: "worker-a", generation: c!.record.generation }, done);
 * const r = await store.get("order-7");
 * console.log(r?.status, r?.output, r?.endedAt); // completed [ 'shipped' ] 20
 * ```
 */
export type Finish =
  | { readonly status: "completed"; readonly output: JsonValue; readonly nowMs: number }
  | { readonly status: "failed" | "cancelled"; readonly error: JournaledError; readonly nowMs: number };

/**
 * Where executions and their journals live: what an engine runs on. `createMemoryStore`,
 * `createSqliteStore` (`@keel/workflow/sqlite`) and `createPostgresStore` (`@keel/workflow/postgres`)
 * implement it, and pass one contract suite; a store of your own implements it too, keeping the
 * invariants above (one claim at a time, fenced writes, entries written once, the caller's clock).
 *
 * @example
 * ```ts
 * import { createMemoryStore, type WorkflowStore } from "@keel/workflow";
 * const store: WorkflowStore = createMemoryStore();
 * await store.init();
 * await store.create({ id: "order-7", workflow: "checkout", version: 1, input: null, deadlineAt: null, nowMs: 0 });
 * const [c] = await store.claim("worker-a", 0, 30_000, 1);
 * const lease = { owner: "worker-a", generation: c!.record.generation };
 * await store.append("order-7", lease, [
 *   { key: "step:charge#1", kind: "step", ok: true, value: ["ch_1"], error: null, attempts: 1, startedAt: 0, endedAt: 3 },
 * ]);
 * console.log(store.description, (await store.journal("order-7")).map((e) => e.key)); // memory [ 'step:charge#1' ]
 * await store.close();
 * ```
 */
export interface WorkflowStore {
  /** For messages and the task tree: `memory`, `postgres 127.0.0.1:5432/test`, `sqlite ./keel.db`. */
  readonly description: string;
  /** Creates the tables if they are missing; idempotent; safe from several processes at once. */
  init(): Promise<void>;
  /** Closes what the store opened (a pool it was given stays open). */
  close(): Promise<void>;
  /**
   * Creates the execution, `pending` (or claimed, with `claim`); an id that exists is left as it is
   * (`created: false`).
   */
  create(execution: NewExecution): Promise<{ created: boolean; record: ExecutionRecord }>;
  /** The execution's record, or null when there is none. */
  get(id: string): Promise<ExecutionRecord | null>;
  /** Records matching `filter`, newest first (default limit 100). */
  list(filter?: ListFilter): Promise<ExecutionRecord[]>;
  /** The execution's journal, in the order written (empty for an unknown id). */
  journal(id: string): Promise<JournalEntry[]>;
  /** The execution's signals, in `seq` order. */
  signals(id: string): Promise<SignalRecord[]>;
  /**
   * Claims up to `limit` runnable executions for `owner` until `nowMs + leaseMs`, oldest due first.
   * Runnable: not ended, not leased (owner null or `leaseUntil <= nowMs`), and either `pending` or
   * `running` (a dead owner's), or parked with `wakeAt <= nowMs`, or with `cancelRequested`.
   * Sets `status: "running"`, the owner, the lease's end and `generation + 1`. With `only`, claims
   * only executions whose `workflow@version` is in it (an engine claims what it can run: during a
   * rolling deploy an old process leaves a new version's executions to the new processes).
   */
  claim(
    owner: string,
    nowMs: number,
    leaseMs: number,
    limit: number,
    only?: readonly string[],
  ): Promise<Claimed[]>;
  /** Extends the lease to `leaseUntil`; false if the claim is no longer current. */
  renew(id: string, lease: Lease, leaseUntil: number): Promise<boolean>;
  /** Appends entries atomically (all or none); `LeaseLostError` if the claim is not current. */
  append(id: string, lease: Lease, entries: readonly JournalEntry[]): Promise<void>;
  /** Parks the execution and ends the claim (see {@link Park}); `LeaseLostError` if not current. */
  park(id: string, lease: Lease, park: Park): Promise<void>;
  /** Ends the claim and leaves the execution `pending` for another process (a shutdown). */
  release(id: string, lease: Lease, nowMs: number): Promise<void>;
  /** Ends the execution with its outcome and ends the claim; `LeaseLostError` if not current. */
  finish(id: string, lease: Lease, finish: Finish): Promise<void>;
  /**
   * Keeps a signal for the execution; a parked execution waiting for `name` becomes `pending`.
   * Returns the signal's seq, or null when there is no such execution or it has ended.
   */
  signal(id: string, name: string, payload: JsonValue, nowMs: number): Promise<number | null>;
  /**
   * Marks the execution for cancellation (a parked one becomes `pending`); the first reason stays.
   * Returns the record, or null when there is no such execution.
   */
  requestCancel(id: string, reason: string, nowMs: number): Promise<ExecutionRecord | null>;
  /**
   * The earliest instant a parked execution is due (its `wakeAt`), or a lease ends, among those not
   * ended: for a poller to sleep until; null when none.
   */
  nextDueAt(): Promise<number | null>;
}

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

/** A JSON value: what a journal can hold. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/**
 * Where an execution is.
 * - `pending`: created or woken, waiting for a process to claim it.
 * - `running`: claimed by a process (see `owner`).
 * - `sleeping` / `waiting`: parked on a durable sleep / an event (`wakeAt` says when it is due
 *   anyway: the sleep's end, the event's timeout, or null for an event with no timeout).
 * - `completed` / `failed` / `cancelled`: ended; `output` or `error` holds the outcome.
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

/** An error as the journal keeps it: enough to throw the same error again on replay. */
export interface JournaledError {
  readonly name: string;
  readonly message: string;
  readonly code?: string;
  readonly stack?: string;
  /** The error's own enumerable properties that are JSON (`status`, `retryable`, ...). */
  readonly data?: { readonly [key: string]: JsonValue };
  readonly cause?: JournaledError;
}

export interface ExecutionRecord {
  readonly id: string;
  readonly workflow: string;
  /** The definition's version when the execution started (see `workflow(name, { version })`). */
  readonly version: number;
  readonly input: JsonValue;
  readonly status: ExecutionStatus;
  readonly createdAt: number;
  readonly updatedAt: number;
  /** The execution's absolute deadline, or null for none. */
  readonly deadlineAt: number | null;
  /** For a parked execution: when it is due anyway (a sleep's end, an event's timeout); else null. */
  readonly wakeAt: number | null;
  /** For a parked execution: the event names it waits for (empty for a sleep). */
  readonly waitingFor: readonly string[];
  /** What it waits on, for people: `sleep until 2026-12-06T10:00:00.000Z`, `event "approved"`. */
  readonly waitingOn: string | null;
  readonly owner: string | null;
  readonly leaseUntil: number | null;
  /** Bumped by every claim: the fencing token of the current claim. */
  readonly generation: number;
  /** Set by `requestCancel`: the reason; the execution is runnable until it ends. */
  readonly cancelRequested: string | null;
  readonly output: JsonValue | null;
  readonly error: JournaledError | null;
  readonly endedAt: number | null;
}

/** What `create` is given. */
export interface NewExecution {
  readonly id: string;
  readonly workflow: string;
  readonly version: number;
  readonly input: JsonValue;
  readonly deadlineAt: number | null;
  readonly nowMs: number;
}

/**
 * One journal entry: the outcome of a step, the instant of a durable sleep, an event taken or
 * timed out, a `now()` or `random()` read, a `patched()` answer.
 */
export interface JournalEntry {
  /** The entry's identity in its execution: `step:charge#1`, `sleep#2`, `event:approved#1`. */
  readonly key: string;
  readonly kind: "step" | "sleep" | "event" | "now" | "random" | "patch";
  readonly ok: boolean;
  /** The value (ok), or null. For a sleep: `{ wakeAt }`; for an event: `{ payload, signal }`. */
  readonly value: JsonValue;
  readonly error: JournaledError | null;
  /** How many times the step's operation ran (its retries included); 0 for other kinds. */
  readonly attempts: number;
  readonly startedAt: number;
  readonly endedAt: number;
}

/** A signal sent to an execution, kept until a wait takes it. `seq` grows per execution from 1. */
export interface SignalRecord {
  readonly seq: number;
  readonly name: string;
  readonly payload: JsonValue;
  readonly at: number;
}

/** A claim's identity, named by every write made under it. */
export interface Lease {
  readonly owner: string;
  readonly generation: number;
}

/** An execution a process has claimed, with all it needs to replay. */
export interface Claimed {
  readonly record: ExecutionRecord;
  readonly journal: readonly JournalEntry[];
  readonly signals: readonly SignalRecord[];
}

export interface ListFilter {
  readonly status?: ExecutionStatus | readonly ExecutionStatus[];
  readonly workflow?: string;
  /** At most this many, newest first (default 100). */
  readonly limit?: number;
}

/** How a claim parks its execution: it gives up its lease and sleeps until `wakeAt` or a signal. */
export interface Park {
  readonly status: "sleeping" | "waiting";
  readonly wakeAt: number | null;
  readonly waitingFor: readonly string[];
  readonly waitingOn: string;
  /**
   * The highest signal seq the claim had seen: a signal for one of `waitingFor` newer than this
   * leaves the execution `pending` (runnable) instead of parked, so no signal is slept through.
   */
  readonly signalsSeen: number;
  readonly nowMs: number;
}

/** How a claim ends its execution. */
export type Finish =
  | { readonly status: "completed"; readonly output: JsonValue; readonly nowMs: number }
  | { readonly status: "failed" | "cancelled"; readonly error: JournaledError; readonly nowMs: number };

export interface WorkflowStore {
  /** For messages and the task tree: `memory`, `postgres 127.0.0.1:5432/test`, `sqlite ./keel.db`. */
  readonly description: string;
  /** Creates the tables if they are missing; idempotent; safe from several processes at once. */
  init(): Promise<void>;
  /** Closes what the store opened (a pool it was given stays open). */
  close(): Promise<void>;
  /** Creates the execution, `pending`; an id that exists is left as it is (`created: false`). */
  create(execution: NewExecution): Promise<{ created: boolean; record: ExecutionRecord }>;
  get(id: string): Promise<ExecutionRecord | null>;
  list(filter?: ListFilter): Promise<ExecutionRecord[]>;
  journal(id: string): Promise<JournalEntry[]>;
  signals(id: string): Promise<SignalRecord[]>;
  /**
   * Claims up to `limit` runnable executions for `owner` until `nowMs + leaseMs`, oldest due first.
   * Runnable: not ended, not leased (owner null or `leaseUntil <= nowMs`), and either `pending` or
   * `running` (a dead owner's), or parked with `wakeAt <= nowMs`, or with `cancelRequested`.
   * Sets `status: "running"`, the owner, the lease's end and `generation + 1`.
   */
  claim(owner: string, nowMs: number, leaseMs: number, limit: number): Promise<Claimed[]>;
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

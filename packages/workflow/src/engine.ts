/**
 * The workflow engine: runs executions from a store, and is the API to start, signal, cancel and
 * read them. Executions run on the store itself (a poller claims the runnable ones, with a lease),
 * not on a job queue: a parked execution is one row, recovery needs no job to exist for it, and
 * the embedded store works with no other server (see the workflows guide, "Where executions run").
 * @module
 */

import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import {
  addInspectSection,
  describeThrown,
  emitEvent,
  isCancelled,
  type Operation,
  resource,
  spawn,
  until,
  useClock,
  useScope,
} from "@keel/core";
import { checkKeys, checkMs, checkObject, checkWhole, invalidType } from "./checks.js";
import type { Workflow } from "./definition.js";
import { DurableWait } from "./durable-wait.js";
import { ExecutionNotFoundError, UnknownWorkflowError, WorkflowFailedError } from "./errors.js";
import type { Incarnation } from "./incarnation.js";
import { renderEngine } from "./inspect.js";
import { restoreError, toJournal, unwrapValue, wrapValue } from "./json.js";
import { type RunContext, runExecution } from "./run-execution.js";
import type {
  ExecutionRecord,
  Finish,
  JournalEntry,
  JsonValue,
  ListFilter,
  WorkflowStore,
} from "./store/store.js";
import { ENDED_STATUSES } from "./store/store.js";
import { storeCall } from "./store-call.js";
import { type ExecutionView, viewOf } from "./view.js";

/**
 * What {@link startWorkflowEngine} takes: the store, the definitions it runs, and how it claims.
 * Every option is checked at the call; a bad one is refused with a `TypeError` or `RangeError`
 * naming it.
 *
 * **Time.** `leaseMs` is how long a dead process's executions wait before another process resumes
 * them (rule W12), and how long this process may be cut off from the store before it loses them;
 * the claim is renewed every `leaseMs / 3`, and a cancel or a signal sent from another process
 * reaches a running execution at a renewal.
 *
 * @example
 * ```ts
 * import { createMemoryStore, type WorkflowEngineOptions, workflow } from "@keel/workflow";
 * const noop = workflow("noop", function* () {});
 * const options: WorkflowEngineOptions = {
 *   store: createMemoryStore(),
 *   workflows: [noop],
 *   concurrency: 32,
 *   leaseMs: 15_000,
 *   owner: "web-1",
 * };
 * console.log(options.workflows.length, options.leaseMs); // 1 15000
 * ```
 */
export interface WorkflowEngineOptions {
  /** Where executions and their journals live (`createMemoryStore`, `createSqliteStore`, `createPostgresStore`). */
  readonly store: WorkflowStore;
  /** The definitions this engine runs (several versions of one name allowed). */
  readonly workflows: readonly Workflow<never, unknown>[];
  /** Executions run at once by this process (default 16). */
  readonly concurrency?: number;
  /** How long a claim holds without renewal (default 30,000): a dead process's executions resume elsewhere after it. */
  readonly leaseMs?: number;
  /** The longest the poller waits before asking the store again (default 1,000). */
  readonly pollMs?: number;
  /** A quiet body parks when its next wake is at least this far away (default 1,000). */
  readonly parkAfterMs?: number;
  /**
   * The bound on every call to the store (default 10,000; `Infinity` allowed): a call past it fails
   * with `StoreTimeoutError` (an execution stops here and resumes elsewhere; a claim reports the
   * store down).
   */
  readonly storeTimeoutMs?: number;
  /** This process's name in claims (default `host:pid:random`). */
  readonly owner?: string;
  /** False for an engine that only starts, signals and reads executions, running none (default true). */
  readonly run?: boolean;
}

/**
 * How {@link WorkflowEngine.start} creates an execution: its id, and its deadline.
 *
 * **Time.** The deadline is absolute and stored with the execution: it holds across sleeps and
 * restarts, steps see what is left of it (`remaining()`), and there the body is cancelled and the
 * execution ends `failed` with `ExecutionDeadlineError` (rule W10).
 *
 * @example
 * ```ts
 * import type { StartOptions } from "@keel/workflow";
 * const sevenDays: StartOptions = { id: "order-7", ttlMs: 7 * 24 * 3600_000 };
 * const byNewYear: StartOptions = { id: "order-8", deadlineAt: Date.parse("2027-01-01T00:00:00Z") };
 * console.log(sevenDays.ttlMs, new Date(byNewYear.deadlineAt!).toISOString()); // 604800000 2027-01-01T00:00:00.000Z
 * ```
 */
export interface StartOptions {
  /** The execution's id: a second start with it returns the existing execution (default a UUID). */
  readonly id?: string;
  /** An absolute deadline (ms since the epoch) for the whole execution (rule W10). */
  readonly deadlineAt?: number;
  /** The same as a deadline `ttlMs` from now. */
  readonly ttlMs?: number;
}

/**
 * What {@link WorkflowEngine.start} returns: the execution's id, whether this call created it, and
 * its record as the store holds it.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createMemoryStore, startWorkflowEngine, type Started, workflow } from "@keel/workflow";
 * const noop = workflow("noop", function* () {});
 * await run(function* () {
 *   const engine = yield* startWorkflowEngine({ store: createMemoryStore(), workflows: [noop], run: false });
 *   const first: Started = yield* engine.start(noop, null, { id: "n-1" });
 *   const again: Started = yield* engine.start(noop, null, { id: "n-1" });
 *   console.log(first.created, again.created, again.record.status); // true false pending
 * });
 * ```
 */
export interface Started {
  /** The execution's id (the one given, or a new UUID). */
  readonly id: string;
  /** False when an execution with this id existed: nothing was started (rule W12). */
  readonly created: boolean;
  /** The execution's record: the new one, or the existing one's. */
  readonly record: ExecutionRecord;
}

/**
 * A running workflow engine (see {@link startWorkflowEngine}): it runs executions from its store in
 * the background, and is the API to start, signal, cancel and read them. Every method reaches the
 * execution through the store, so it works on executions any process runs.
 *
 * **Cancellation.** The engine lives as long as the scope that started it; when that scope ends,
 * the engine hands back the executions it runs (rule W12).
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * import { createMemoryStore, startWorkflowEngine, waitForEvent, type WorkflowEngine, workflow } from "@keel/workflow";
 * const approval = workflow("approval", function* () {
 *   return yield* waitForEvent<{ by: string }>("approved");
 * });
 * await run(function* () {
 *   const engine: WorkflowEngine = yield* startWorkflowEngine({ store: createMemoryStore(), workflows: [approval] });
 *   yield* engine.start(approval, null, { id: "a-1" });
 *   yield* engine.signal("a-1", "approved", { by: "ops" });
 *   console.log(yield* engine.result("a-1")); // { by: 'ops' }
 *   console.log((yield* engine.list({ status: "completed" })).map((r) => r.id)); // [ 'a-1' ]
 * }, { clock: createVirtualClock() });
 * ```
 */
export interface WorkflowEngine {
  /** This process's name in claims (`WorkflowEngineOptions.owner`). */
  readonly owner: string;
  /** The store the engine runs on. */
  readonly store: WorkflowStore;
  /**
   * Creates an execution of `workflow` with `input` (JSON: rule W9), `pending` until an engine
   * claims it. Idempotent by id: an id that exists returns that execution, `created: false`.
   * @throws {UnknownWorkflowError} when this engine was not given `workflow` (its name and version).
   * @throws {NotJournalableError} when `input` is not plain JSON.
   */
  start<I, O>(workflow: Workflow<I, O>, input: I, options?: StartOptions): Operation<Started>;
  /** Waits for the execution to end: its result, or a `WorkflowFailedError` (failed or cancelled). */
  result<O = unknown>(id: string): Operation<O>;
  /** The execution for people: its status, its steps, what it waits on; null for an unknown id. */
  get(id: string): Operation<ExecutionView | null>;
  /** Execution records, newest first (at most `filter.limit`, default 100). */
  list(filter?: ListFilter): Operation<ExecutionRecord[]>;
  /** The execution's journal entries, in the order they were written. */
  journal(id: string): Operation<JournalEntry[]>;
  /**
   * Sends the event `name` with `payload` (JSON) to the execution (rule W8): kept until a
   * `waitForEvent(name)` takes it; a parked execution waiting for it becomes runnable.
   * @throws {ExecutionNotFoundError} when there is no such execution, or it has ended.
   */
  signal(id: string, name: string, payload?: unknown): Operation<void>;
  /**
   * Cancels the execution wherever it is (rule W11): its body gets `Cancelled`, its `finally` blocks
   * run, and it ends `cancelled` with `reason`. An execution that has ended is left as it is.
   * @throws {ExecutionNotFoundError} when there is no such execution.
   */
  cancel(id: string, reason?: string): Operation<void>;
  /** Executions running in this process now. */
  readonly running: number;
}

interface Config extends Required<Omit<WorkflowEngineOptions, "workflows" | "store">> {}

function checkOptions(options: WorkflowEngineOptions): Config {
  const at = "startWorkflowEngine(options)";
  checkKeys(at, checkObject(at, options), [
    "store",
    "workflows",
    "concurrency",
    "leaseMs",
    "pollMs",
    "parkAfterMs",
    "storeTimeoutMs",
    "owner",
    "run",
  ]);
  const store = options.store as WorkflowStore | undefined;
  if (typeof store?.claim !== "function")
    throw invalidType(
      `${at} { store }`,
      "a workflow store (createMemoryStore, createPostgresStore, createSqliteStore)",
      store,
    );
  if (!Array.isArray(options.workflows))
    throw invalidType(`${at} { workflows }`, "an array of workflow(...) definitions", options.workflows);
  const owner = options.owner ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  if (typeof owner !== "string" || owner.length === 0)
    throw invalidType(`${at} { owner }`, "a non-empty string", owner);
  return {
    concurrency: checkWhole(`${at} { concurrency }`, options.concurrency ?? 16, 1),
    leaseMs: checkMs(`${at} { leaseMs }`, options.leaseMs ?? 30_000, { allowInfinity: false, min: 3 }),
    pollMs: checkMs(`${at} { pollMs }`, options.pollMs ?? 1_000, { allowInfinity: false, min: 1 }),
    parkAfterMs: checkMs(`${at} { parkAfterMs }`, options.parkAfterMs ?? 1_000),
    storeTimeoutMs: checkMs(`${at} { storeTimeoutMs }`, options.storeTimeoutMs ?? 10_000, { min: 1 }),
    owner,
    run: options.run ?? true,
  };
}

/** A caller's own copy of an outcome (as a read of the store would give it: waiters share nothing). */
const copyJson = (value: JsonValue): JsonValue => (value === null ? null : JSON.parse(JSON.stringify(value)));

/**
 * Starts a workflow engine for the caller's scope: it claims and runs executions until the scope
 * ends, then hands back the ones it holds (steps in flight are cancelled and run again elsewhere).
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createMemoryStore, startWorkflowEngine, step, workflow } from "@keel/workflow";
 * const hello = workflow("hello", function* (name: string) {
 *   return yield* step("greet", function* () { return `hello, ${name}`; });
 * });
 * await run(function* () {
 *   const engine = yield* startWorkflowEngine({ store: createMemoryStore(), workflows: [hello] });
 *   const { id } = yield* engine.start(hello, "Ada", { id: "hello-ada" });
 *   console.log(yield* engine.result(id)); // hello, Ada
 *   console.log((yield* engine.get(id))?.status); // completed
 * });
 * ```
 */
export function startWorkflowEngine(options: WorkflowEngineOptions): Operation<WorkflowEngine> {
  const config = checkOptions(options);
  const { store } = options;
  const definitions = new Map<string, Workflow<unknown, unknown>>();
  for (const [i, w] of options.workflows.entries()) {
    if (typeof (w as Workflow | null)?.body !== "function")
      throw invalidType(`startWorkflowEngine(options) { workflows[${i}] }`, "a workflow(...) definition", w);
    definitions.set(`${w.name}@${w.version}`, w as Workflow<unknown, unknown>);
  }
  return resource<WorkflowEngine>(function* workflowEngine(provide) {
    const clock = yield* useClock();
    const scope = yield* useScope();
    yield* until(storeCall(clock, store, config.storeTimeoutMs, "init", () => store.init()));
    const live = new Map<string, Incarnation>();
    // What this engine claims: only executions of the definitions it has (a rolling deploy's old
    // process leaves a new version's executions to the new ones, instead of failing them).
    const runnable = [...definitions.keys()];
    // Told of an execution's end in this process: its outcome as written, or null (parked, lost,
    // handed back, or the wait's poll interval passed).
    const endWaiters = new Map<string, Set<(finish: Finish | null) => void>>();
    // Slots `start` has taken for executions it creates claimed, until they are in `live`.
    let reserved = 0;
    let rung = false;
    let ring: (() => void) | null = null;
    const doorbell = () => {
      rung = true;
      ring?.();
    };
    const ctx: RunContext = {
      store,
      clock,
      owner: config.owner,
      leaseMs: config.leaseMs,
      parkAfterMs: config.parkAfterMs,
      storeTimeoutMs: config.storeTimeoutMs,
      find: (name, version) => definitions.get(`${name}@${version}`),
      known: () => [...definitions.keys()],
      started: (inc) => live.set(inc.id, inc),
      ended: (id, finish) => {
        live.delete(id);
        for (const w of endWaiters.get(id) ?? []) w(finish);
        doorbell();
      },
    };
    const io = <T>(what: string, call: () => Promise<T>): Operation<T> =>
      until(storeCall(clock, store, config.storeTimeoutMs, what, call));
    /** Waits until rung, or `ms` on the engine's clock. */
    const nap = (ms: number, description: string) =>
      new DurableWait<void>(description, (resolve) => {
        if (rung) {
          rung = false;
          resolve({ ok: true, value: undefined });
          return undefined;
        }
        const wake = () => {
          rung = false;
          resolve({ ok: true, value: undefined });
        };
        ring = wake;
        const cancel = clock.schedule(clock.now() + ms, wake);
        return () => {
          ring = null;
          cancel();
        };
      });

    if (config.run) {
      yield* spawn(function* poller() {
        // A store that fails is reported once (a warning) and asked again every pollMs: the engine
        // never dies of an outage, and never hides one.
        let downSince: number | null = null;
        for (;;) {
          try {
            const free = config.concurrency - live.size - reserved;
            if (free > 0) {
              const claimed = yield* io("claim", () =>
                store.claim(config.owner, clock.now(), config.leaseMs, free, runnable),
              );
              if (downSince !== null) {
                const downForMs = clock.now() - downSince;
                downSince = null;
                yield* emitEvent({
                  type: "workflow:store",
                  store: store.description,
                  state: "up",
                  downForMs,
                  message: `workflow store ${store.description} answers again`,
                });
              }
              for (const c of claimed) {
                live.set(c.record.id, null as unknown as Incarnation);
                scope.spawn(runExecution(ctx, c), { name: `execution ${c.record.id}` });
              }
              if (claimed.length === free) continue;
            }
            const next = yield* io("next due", () => store.nextDueAt());
            const untilNext = next === null ? config.pollMs : next - clock.now();
            yield* nap(
              Math.max(0, Math.min(config.pollMs, untilNext)),
              "workflow engine: waiting for due executions",
            );
          } catch (error) {
            if (isCancelled(error)) throw error;
            if (downSince === null) {
              downSince = clock.now();
              yield* emitEvent({
                type: "workflow:store",
                store: store.description,
                state: "down",
                error,
                message: `workflow store ${store.description} failed (${describeThrown(error)}): claiming again every ${config.pollMs} ms`,
              });
            }
            yield* nap(config.pollMs, "workflow engine: the store is down, waiting to ask again");
          }
        }
      });
    }

    const waitForEnd = (id: string) =>
      new DurableWait<Finish | null>(`execution ${id}: waiting for its end`, (resolve) => {
        const set = endWaiters.get(id) ?? new Set();
        endWaiters.set(id, set);
        const done = (finish: Finish | null) => resolve({ ok: true, value: finish });
        set.add(done);
        const cancel = clock.schedule(clock.now() + config.pollMs, () => done(null));
        return () => {
          set.delete(done);
          if (set.size === 0) endWaiters.delete(id);
          cancel();
        };
      });

    const engine: WorkflowEngine = {
      owner: config.owner,
      store,
      get running() {
        return live.size;
      },
      *start(workflow, input, options = {}) {
        const at = `engine.start(${(workflow as Workflow | null)?.name ?? "workflow"}, input, options)`;
        if (typeof (workflow as Workflow | null)?.body !== "function")
          throw invalidType("engine.start(workflow)", "a workflow(...) definition", workflow);
        checkKeys(at, checkObject(at, options), ["id", "deadlineAt", "ttlMs"]);
        if (!definitions.has(`${workflow.name}@${workflow.version}`))
          throw new UnknownWorkflowError(workflow.name, workflow.version, [...definitions.keys()]);
        const id = options.id ?? randomUUID();
        if (typeof id !== "string" || id.length === 0 || id.length > 200)
          throw invalidType(`${at} { id }`, "a non-empty string of at most 200 characters", id);
        if (options.deadlineAt !== undefined && options.ttlMs !== undefined)
          throw invalidType(`${at} { deadlineAt, ttlMs }`, "one of deadlineAt and ttlMs, not both", options);
        const nowMs = clock.now();
        let deadlineAt: number | null = null;
        if (options.ttlMs !== undefined)
          deadlineAt = nowMs + checkMs(`${at} { ttlMs }`, options.ttlMs, { allowInfinity: false });
        if (options.deadlineAt !== undefined) {
          if (typeof options.deadlineAt !== "number" || !Number.isFinite(options.deadlineAt))
            throw invalidType(
              `${at} { deadlineAt }`,
              "a finite number of ms since the epoch",
              options.deadlineAt,
            );
          deadlineAt = options.deadlineAt;
        }
        const journaled = wrapValue(input, `${workflow.name}'s input`);
        // With a free slot this engine runs the new execution itself: created claimed, and run at
        // once, with no poller turn, claim or journal read in between (a new execution has no
        // journal, and no signal can reach it before the create returns its id).
        const runHere = config.run && live.size + reserved < config.concurrency;
        if (runHere) reserved++;
        let made: Awaited<ReturnType<WorkflowStore["create"]>>;
        try {
          made = yield* io("create", () =>
            store.create({
              id,
              workflow: workflow.name,
              version: workflow.version,
              input: journaled,
              deadlineAt,
              nowMs,
              ...(runHere ? { claim: { owner: config.owner, leaseMs: config.leaseMs } } : {}),
            }),
          );
        } finally {
          if (runHere) reserved--;
        }
        if (runHere && made.created) {
          live.set(id, null as unknown as Incarnation);
          scope.spawn(runExecution(ctx, { record: made.record, journal: [], signals: [] }), {
            name: `execution ${id}`,
          });
        } else if (made.created) doorbell();
        return { id, created: made.created, record: made.record };
      },
      result<O>(id: string): Operation<O> {
        return {
          *[Symbol.iterator]() {
            for (;;) {
              // An execution this process runs ends here: its outcome comes from that end, with no
              // read of the store. Any other (running elsewhere, parked, or lost here) is read.
              if (!live.has(id)) {
                const record = yield* io("get", () => store.get(id));
                if (record === null) throw new ExecutionNotFoundError(id);
                if (record.status === "completed") return unwrapValue(record.output) as O;
                if (record.status === "failed" || record.status === "cancelled")
                  throw new WorkflowFailedError(id, record.status, restoreError(record.error!));
              }
              const finish = yield* waitForEnd(id);
              if (finish?.status === "completed") return unwrapValue(copyJson(finish.output)) as O;
              if (finish !== null)
                throw new WorkflowFailedError(id, finish.status, restoreError(finish.error));
            }
          },
        };
      },
      *get(id) {
        const record = yield* io("get", () => store.get(id));
        if (record === null) return null;
        const journal = yield* io("journal", () => store.journal(id));
        return viewOf(record, journal);
      },
      *list(filter) {
        return yield* io("list", () => store.list(filter));
      },
      *journal(id) {
        return yield* io("journal", () => store.journal(id));
      },
      *signal(id, name, payload) {
        if (typeof name !== "string" || name.length === 0)
          throw invalidType("engine.signal(id, name)", "a non-empty string", name);
        const journaled = toJournal(payload === undefined ? null : payload, `signal ${name}'s payload`);
        const at = clock.now();
        const seq = yield* io("signal", () => store.signal(id, name, journaled, at));
        if (seq === null) throw new ExecutionNotFoundError(id, "or it has ended");
        live.get(id)?.waits.received({ seq, name, payload: journaled, at });
        doorbell();
      },
      *cancel(id, reason = "cancelled") {
        const record = yield* io("cancel", () => store.requestCancel(id, reason, clock.now()));
        if (record === null) throw new ExecutionNotFoundError(id);
        if (ENDED_STATUSES.includes(record.status)) return;
        live.get(id)?.requestStop("cancel", record.cancelRequested ?? reason);
        doorbell();
      },
    };
    // keel-inspect <pid> shows this engine's executions by status (see inspect.ts).
    const removeSection = addInspectSection(`workflow engine ${config.owner}`, () =>
      renderEngine(store, config.owner, [...live.keys()]),
    );
    try {
      yield* provide(engine);
    } finally {
      removeSection();
    }
  });
}

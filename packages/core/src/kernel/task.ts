/**
 * Tasks: the nodes of the task tree, and the driver that runs an operation's generator.
 *
 * Reading guide. A task drives one iterator. Each value it yields is an instruction: a request for
 * the current task (answered at once) or a {@link Suspension} (the task waits). Every resumption goes
 * through the run queue, and before a task resumes it asks {@link TaskImpl.takeDelivery} whether a
 * cancellation must be thrown instead. Cancellation requests are counted per task (`firstRequest`, a list);
 * each belongs to the frame that made it, or to the task's root frame when it came from outside.
 * @module
 */
import {
  appendSuppressed,
  invalidType,
  isTaskCancelledError,
  KeelError,
  TaskCancelledError,
} from "../errors.js";
import { type KeelEvent, type KeelEventInput, warningEvents } from "../observe/events.js";
import type { AsyncContext } from "./async-context.js";
import {
  BUDGET_KEY,
  CancellableTask,
  CLEANUP_CAP_KEY,
  CLOCK_KEY,
  type Current,
  DEFAULT_CLEANUP_BUDGET_MS,
  WAIT_GUARD_KEY,
} from "./cancellable.js";
import { Cancelled, type CancelReason, isCancelled } from "./cancelled.js";
import { type Clock, stampNow } from "./clock.js";
import type { ContextValues } from "./context-values.js";
import { type CancelRequest, cleanupDeadlineOf, Frame, unwindingAt } from "./frame.js";
import { closeNext } from "./frame-exit.js";
import {
  ASK_TASK,
  CURRENT_TASK,
  type Future,
  generatorNext,
  generatorThrow,
  isNativeGenerator,
  iterate,
  type Op,
  type Operation,
  type Outcome,
  type Suspension,
  SuspensionClass,
  structuralWait,
  suspensionClass,
  type WaitDetail,
  type Waiter,
  type WaitGuard,
} from "./operation.js";
import { notAnInstruction, type Runtime } from "./runtime.js";
import { SettledPromise } from "./settled-promise.js";

export {
  BUDGET_KEY,
  type CancelRequest,
  CLEANUP_CAP_KEY,
  CLOCK_KEY,
  DEFAULT_CLEANUP_BUDGET_MS,
  WAIT_GUARD_KEY,
};

// Names this class for the files it is built on (`tree-task.ts`), which cannot import this one.
declare module "./tree-task.js" {
  interface TaskSlot {
    readonly task: TaskImpl<unknown>;
  }
}

import { enqueue } from "./scheduler.js";
import { shapes } from "./shapes.js";

/**
 * A task's life: `cancelling` while cancellation requests are in flight against it.
 *
 * @example
 * ```ts
 * import { run, sleep, suspend, type TaskState } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const seen: TaskState[] = [];
 * const task = run(function* worker() {
 *   try { yield* suspend(); } finally { yield* sleep(10); } // cleanup takes 10 ms
 * }, { clock: createVirtualClock() });
 * await new Promise((resolve) => setImmediate(resolve)); // let its body start
 * seen.push(task.state);
 * const stopped = task.cancel();
 * seen.push(task.state);
 * await stopped;
 * seen.push(task.state);
 * console.log(seen); // ["running", "cancelling", "cancelled"]
 * ```
 */
export type TaskState = "running" | "cancelling" | "completed" | "failed" | "cancelled";

/**
 * A running operation in the task tree. Await it from promise code or `yield*` it from an operation
 * to join it: you get its value or its error, and `TaskCancelledError` if it ended cancelled.
 *
 * For promise code a task is a promise: `then`, `catch` and `finally` behave as a `Promise`'s, and a
 * `Task<T>` can be passed wherever a `Promise<T>` is expected. A root task (from `run`) that fails
 * while nobody has joined it (no `then`/`catch`/`finally`/`await`, no `yield*`) rejects as an
 * unhandled promise would: the host reports it (Node: `unhandledRejection`, by default a crash
 * printing the error). A root that ends cancelled is never reported: whoever cancelled it knows.
 *
 * @example
 * ```ts
 * import { run, sleep, type Task } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const clock = createVirtualClock();
 * const task: Task<string> = run(function* report() { yield* sleep(1000); return "report"; }, { clock });
 * console.log(task.name, task.state, task.cancellationCount); // report running 0
 * console.log(await task, task.state, clock.now()); // report completed 1000
 * const failing: Promise<never> = run(function* broken(): Generator<never, never> { throw new Error("down"); });
 * console.log(await failing.catch((e: Error) => e.message)); // down
 * ```
 */
export interface Task<T> extends Promise<T>, Operation<T> {
  readonly id: number;
  readonly name: string;
  /** `name#id` segments from the root: `main#1/handler#4`. */
  readonly path: string;
  readonly state: TaskState;
  /** Cancellation requests in flight against this task (the counting rule's count). */
  readonly cancellationCount: number;
  /**
   * Asks the task to cancel (reason kind `"cancel"`, with `message`); idempotent. The future settles
   * when the task has finished unwinding, which the cleanup budget bounds.
   */
  cancel(message?: string): Future<void>;
}

type Final =
  | { state: "completed"; value: unknown }
  | { state: "failed"; error: unknown }
  | { state: "cancelled"; reason: CancelReason };

type SettledState = Final["state"];

let nextTaskId = 1;
const SHIELDED = 1;
const RESOURCE = 2;
const BEGAN = 4;
/** The body is a native generator: stepped through `%GeneratorPrototype%`'s methods directly. */
const NATIVE_BODY = 32;
/**
 * How the task settled, two bits of `flags` (0: not yet). With `result`, this replaces an outcome
 * object per task: settled tasks are what a fan-in holds by the 100k, so each field counts.
 */
const SETTLED_SHIFT = 6;
const SETTLED_MASK = 3 << SETTLED_SHIFT;
const COMPLETED = 1 << SETTLED_SHIFT;
const FAILED = 2 << SETTLED_SHIFT;
const CANCELLED = 3 << SETTLED_SHIFT;
const STATE_BITS = { completed: COMPLETED, failed: FAILED, cancelled: CANCELLED } as const;

interface TaskExtras<T> {
  path: string | null;
  promise: Promise<T> | null;
  /** Someone joins the task (a `then`, a `yield*`, `main`): its failure is theirs to report. */
  handled: boolean;
  /** The last suspension a cancellation was thrown into at once, for the abandonment report. */
  lastRefused: string | null;
}

/**
 * The task whose generator is executing right now: set around every step of `advance`, restored
 * after (the drain never nests, but an interop may drive a task from inside another's step). Lets an
 * operation find its task without the `CURRENT_TASK` round trip; null outside any step, where the
 * instruction still works (and an operation driven by hand gets `KEEL_NO_TASK`).
 */
let running: TaskImpl<unknown> | null = null;

/** What times each step of every task, while a `main` with `blockedStepMs` runs. */
export interface StepWatch {
  readonly thresholdMs: number;
  /** A monotonic host clock (`performance.now`): a blocked step is host time, whatever the tree's clock. */
  now(): number;
}

/** @internal The task executing now, or null (see `running`). */
export function runningTask(): TaskImpl<unknown> | null {
  return running;
}

/**
 * The task whose event is being handed out (to `onEvent`, a logger), else null: a record is about
 * that task, which is often not the running one (a `cancel:request` is made by the canceller).
 */
let emitting: TaskImpl<unknown> | null = null;

/** @internal The task whose event is being handed out, else null (see `log-fields.ts`). */
export function emittingTask(): TaskImpl<unknown> | null {
  return emitting;
}

/**
 * @internal Runs `fn` as outside any task's step: for another runtime's code started from a step
 * (effection's), so that a Keel operation it drives by mistake fails as it would anywhere else
 * instead of silently joining the task that happened to start it.
 */
export function outsideTask<R>(fn: () => R): R {
  const outer = running;
  running = null;
  try {
    return fn();
  } finally {
    running = outer;
  }
}

export interface TaskInit {
  readonly name: string;
  readonly parent: TaskImpl<unknown> | null;
  readonly owner: Frame | null;
  readonly runtime: Runtime;
  readonly contexts: ContextValues;
  readonly deadline: number;
  /** A shield's task: cancellation from outside its owner does not reach it. */
  readonly shielded?: boolean;
  /** A resource's task: cancelled only when its owning scope exits, never with the region. */
  readonly resource?: boolean;
  /** A root that lives as long as the process (`main`'s): reported as `longLived` on `task:start`. */
  readonly longLived?: boolean;
}

export class TaskImpl<T> extends CancellableTask implements Task<T> {
  readonly id = nextTaskId++;
  readonly name: string;
  readonly parent: TaskImpl<unknown> | null;
  readonly owner: Frame | null;
  readonly runtime: Runtime;
  /** Links in the owner frame's child list (see `ChildList`). */
  prevSibling: TaskImpl<unknown> | null = null;
  nextSibling: TaskImpl<unknown> | null = null;
  readonly startedAt: number;
  /**
   * The operation until the task begins, then its iterator until the body finishes, then null (one
   * field for both: they never coexist). Invariant: the `BEGAN` flag tells which.
   */
  private body: Op<T> | Iterator<unknown, T, unknown> | null;
  /**
   * Until the task settles: the body's outcome while the task waits for its children (else null).
   * Once settled (see the `SETTLED_MASK` bits): the value, the error or the `CancelReason`.
   */
  private result: unknown = null;
  private settledCallbacks: Array<() => void> | null = null;
  /** What few tasks need (awaited from promise code, a path asked for, an abandonment report). */
  private extras: TaskExtras<T> | null = null;
  /** What the root frame is made with, when it is first needed (see `CancellableTask.root`). */
  private readonly rootDeadline: number;
  private readonly rootContexts: ContextValues;

  constructor(op: Op<T>, init: TaskInit) {
    super();
    shapes.task = this;
    this.body = op;
    this.name = init.name;
    this.parent = init.parent;
    this.owner = init.owner;
    this.runtime = init.runtime;
    // In the base's `flags`: SHIELDED and RESOURCE fixed at spawn, BEGAN once the body starts.
    this.flags |= (init.shielded ? SHIELDED : 0) | (init.resource ? RESOURCE : 0);
    const clock = init.contexts[CLOCK_KEY] as Clock;
    this.startedAt = stampNow(clock);
    this.rootDeadline = init.deadline;
    this.rootContexts = init.contexts;
    if (init.parent === null) this.runtime.rootId = this.id;
    const guard = init.contexts[WAIT_GUARD_KEY] as WaitGuard | null | undefined;
    if (guard?.spawned) guard.spawned(this, init.parent);
    // Task starts and settles are the hot path: build their events only for a listener.
    if (this.runtime.listening) {
      const deadlineLeftMs = Math.max(0, init.deadline - this.startedAt);
      const parentId = this.parent?.id ?? null;
      if (init.resource || init.longLived)
        this.emit({ type: "task:start", name: this.name, parentId, deadlineLeftMs, longLived: true });
      else this.emit({ type: "task:start", name: this.name, parentId, deadlineLeftMs });
    }
  }

  get rootContextValues(): ContextValues {
    return this.rootContexts;
  }

  protected openRoot(): Frame {
    const f = new Frame(this, null, "task", null, 0, this.rootDeadline, this.rootContexts);
    this.root = this.top = f;
    return f;
  }

  // ---- public surface -------------------------------------------------------------------------

  get path(): string {
    const x = this.extrasOf();
    return (x.path ??= `${this.parent ? `${this.parent.path}/` : ""}${this.name}#${this.id}`);
  }

  /** A shield's task: cancellation from outside its owner does not reach it. */
  get shielded(): boolean {
    return (this.flags & SHIELDED) !== 0;
  }

  /** A resource's task: cancelled only when its owning scope exits, never with the region. */
  get isResource(): boolean {
    return (this.flags & RESOURCE) !== 0;
  }

  private extrasOf(): TaskExtras<T> {
    return (this.extras ??= { path: null, promise: null, handled: false, lastRefused: null });
  }

  get state(): TaskState {
    const settled = this.settledState;
    if (settled !== null) return settled;
    return this.isCancelling ? "cancelling" : "running";
  }

  get cancellationCount(): number {
    return this.requestCount;
  }

  get clock(): Clock {
    // The run's clock, in every context of its tree (no context value can replace it).
    return this.rootContexts[CLOCK_KEY] as Clock;
  }

  /** What the task waits on now, or null while it runs or waits for its children. */
  get waitingOn(): { description: string; since: number; suspension: Suspension } | null {
    const c = this.current;
    return c ? { description: c.s.description, since: c.since, suspension: c.s } : null;
  }

  /** When the first cancellation was delivered and its unwinding's cut, while one is in progress. */
  get unwindingSince(): { at: number; cleanupDeadline: number; reason: CancelReason } | null {
    const u = this.firstUnwinding();
    return u && !this.isSettled
      ? { at: unwindingAt(u), cleanupDeadline: cleanupDeadlineOf(u), reason: u.cancelled.reason }
      : null;
  }

  protected get listening(): boolean {
    return this.runtime.listening;
  }

  protected get hasBody(): boolean {
    return (this.flags & BEGAN) !== 0 && this.body !== null;
  }

  get isSettled(): boolean {
    return (this.flags & SETTLED_MASK) !== 0;
  }

  /** How the task settled, or null while it runs. */
  get settledState(): SettledState | null {
    const bits = this.flags & SETTLED_MASK;
    return bits === 0 ? null : bits === COMPLETED ? "completed" : bits === FAILED ? "failed" : "cancelled";
  }

  /** The error a failed task settled with (undefined for any other state). */
  get failure(): unknown {
    return (this.flags & SETTLED_MASK) === FAILED ? this.result : undefined;
  }

  /** The settled outcome as an object, made on each read (hot paths read `settledState` and `failure`). */
  get outcome(): Final | null {
    const bits = this.flags & SETTLED_MASK;
    if (bits === 0) return null;
    if (bits === COMPLETED) return { state: "completed", value: this.result };
    if (bits === FAILED) return { state: "failed", error: this.result };
    return { state: "cancelled", reason: this.result as CancelReason };
  }

  cancel(message?: string): Future<void> {
    if (message !== undefined && typeof message !== "string")
      throw invalidType("task.cancel(message)", "a string or undefined", message);
    if (!this.isSettled && !this.externalRequest()) {
      const reason: CancelReason = {
        kind: "cancel",
        at: this.clock.now(),
        ...(message === undefined ? {} : { message }),
      };
      this.request(null, reason, true);
    }
    return new SettledPromise(this);
  }

  [Symbol.iterator](): Iterator<unknown, T, unknown> {
    // Only a root's failure can go unreported (see `reportUnhandledFailure`); a child's fails its owner.
    if (this.parent === null) this.markHandled();
    return new JoinIterator(this);
  }

  // biome-ignore lint/suspicious/noThenProperty: a task is awaitable by design.
  then<R1 = T, R2 = never>(
    onfulfilled?: ((value: T) => R1 | PromiseLike<R1>) | null,
    onrejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    this.markHandled();
    return this.promise().then(onfulfilled, onrejected);
  }

  catch<R = never>(onrejected?: ((reason: unknown) => R | PromiseLike<R>) | null): Promise<T | R> {
    return this.then(undefined, onrejected);
  }

  /** As `Promise.prototype.finally`: the promise it returns rejects with the task's error, if any. */
  finally(onfinally?: (() => void) | null): Promise<T> {
    this.markHandled();
    return this.promise().finally(onfinally);
  }

  get [Symbol.toStringTag](): string {
    return "Task";
  }

  /** @internal The outcome reaches someone who reports a failure (`main`, an interop's joiner). */
  markHandled(): void {
    const x = this.extrasOf();
    x.handled = true;
    // A failure already left unhandled (see `reportUnhandledFailure`) is someone's now: tell the host.
    if (x.promise && this.settledState === "failed") x.promise.catch(ignoreRejection);
  }

  /**
   * @internal Called when a root settles: a failure that nobody has joined is left as the rejection
   * of the task's promise with no handler, so the host reports it as any unhandled rejection (and a
   * `then` attached later marks it handled, as for any promise).
   */
  reportUnhandledFailure(): void {
    if (this.settledState === "failed" && !this.extras?.handled) void this.promise();
  }

  /** The task's promise, made on first use: settles with the task's join outcome. */
  private promise(): Promise<T> {
    const x = this.extrasOf();
    x.promise ??= new Promise<T>((resolve, reject) => {
      this.whenSettled(() => {
        const o = this.joinOutcome();
        if (o.ok) resolve(o.value as T);
        else reject(o.error);
      });
    });
    return x.promise;
  }

  // ---- lifecycle ------------------------------------------------------------------------------

  /** Schedules the body for the next turn (semantics §2: `spawn` returns before the body runs). */
  start(): this {
    enqueue(this);
    return this;
  }

  /** @internal The async context the scheduler runs this task's steps in: its runtime's. */
  get asyncContext(): AsyncContext {
    return this.runtime.asyncContext;
  }

  /** @internal The scheduler's entry point (a task queues itself to begin: no closure per spawn). */
  run(): void {
    this.begin();
  }

  private begin(): void {
    if (this.isSettled) return;
    if (this.firstRequest !== null) {
      // Cancelled before its first turn: no user code runs at all.
      this.result = { ok: false, error: new Cancelled(this.firstRequest.reason) } satisfies Outcome<T>;
      this.finish();
      return;
    }
    try {
      const op = this.body as Op<T>;
      this.body = null;
      this.flags |= BEGAN;
      const it = iterate(op);
      if (isNativeGenerator(it)) this.flags |= NATIVE_BODY;
      this.body = it;
    } catch (error) {
      this.bodySettled(false, error);
      return;
    }
    this.advance(true, undefined);
  }

  /**
   * Runs the generator until it suspends or finishes, from a value (`ok`) or an error to throw in.
   * Two arguments, not an Outcome: this runs for every resumption, and most would allocate one.
   */
  private advance(ok: boolean, value: unknown): void {
    for (;;) {
      if (this.abandonPending) {
        this.abandon();
        return;
      }
      const it = this.body as Iterator<unknown, T, unknown> | null;
      if (!it) return;
      let r: IteratorResult<unknown, T>;
      const outer = running;
      running = this;
      try {
        if ((this.flags & NATIVE_BODY) !== 0)
          r = ok ? generatorNext.call(it as Generator, value) : generatorThrow.call(it as Generator, value);
        else if (ok) r = it.next(value);
        else if (it.throw) r = it.throw(value);
        else throw value;
      } catch (error) {
        running = outer;
        this.bodySettled(false, error);
        return;
      }
      running = outer;
      if (r.done) {
        // No Outcome for the common case: a body that needs no frame settles straight from it.
        if (this.settlesPlainly()) this.settle("completed", r.value);
        else this.bodySettled(true, r.value);
        return;
      }
      const instruction = r.value;
      if (instruction === CURRENT_TASK) {
        ok = true;
        value = this;
        continue;
      }
      if (isSuspension(instruction)) {
        const c = this.takeDelivery(instruction.interruptible);
        if (c) {
          this.extrasOf().lastRefused = instruction.description;
          ok = false;
          value = c;
          continue;
        }
        // A wait guard (see wait-guard.ts) sees every wait but the kernel's structural ones (joins),
        // and its refusal is thrown at the yield, as a wait that failed at once would be.
        const guard = this.top.contexts[WAIT_GUARD_KEY] as WaitGuard | null | undefined;
        if (guard != null && (instruction as { structural?: boolean }).structural !== true) {
          const refusal = refuseWait(guard, instruction);
          if (refusal !== undefined) {
            ok = false;
            value = refusal;
            continue;
          }
        }
        this.suspend(instruction);
        return;
      }
      ok = false;
      value = notAnInstruction(instruction);
    }
  }

  private suspend(s: Suspension): void {
    const cur = new Waiting(this, s, stampNow(this.clock));
    this.current = cur;
    if (this.lastUnwinding !== null) this.cleanupWaits();
    try {
      cur.teardown = s.enterWith ? s.enterWith(cur) : s.enter((o) => cur.resolve(o));
    } catch (error) {
      if (!cur.outcome) {
        cur.outcome = { ok: false, error };
        enqueue(cur);
      }
    }
  }

  /** @internal True while `cur` is the suspension the task waits at. */
  isWaitingAt(cur: Current): boolean {
    return this.current === cur;
  }

  /** @internal */
  resumeFrom(cur: Current): void {
    if (this.current !== cur) return;
    this.leave(cur);
    const o = cur.outcome!;
    // A shield only defers delivery while it waits; once it settles, a pending request is due here.
    const kind = cur.s.interruptible;
    if (kind === "shield") this.shieldWaitEnded(cur.s.limitAt ?? Infinity);
    const level = kind === "never" ? "never" : "normal";
    const c = this.takeDelivery(level);
    if (c) {
      // A joined task's cancellation (`TaskCancelledError`) is no error: nothing is dropped.
      if (!o.ok && !isCancelled(o.error) && !isTaskCancelledError(o.error) && !this.holdsError(o.error)) {
        this.emit({
          type: "error:suppressed",
          error: o.error,
          primary: c,
          context: `${cur.s.description}: replaced by cancellation`,
        });
      }
      this.advance(false, c);
    } else if (o.ok) this.advance(true, o.value);
    else this.advance(false, o.error);
  }

  /**
   * True when a scope of this task or of an ancestor has recorded `error` (a joined task that failed
   * its owner), so that scope throws it, or attaches it, when it exits: replacing it here by a
   * cancellation drops nothing, and is not reported as a suppressed error. Walked only on that rare
   * path.
   */
  private holdsError(error: unknown): boolean {
    let f: Frame | null = this.rootOpened ? this.top : this.owner;
    while (f !== null) {
      const errors = f.errors;
      if (errors?.includes(error)) return true;
      f = f.parent ?? f.task.owner;
    }
    return false;
  }

  /** @internal */
  tryInterrupt(cur: Current): void {
    if (this.current !== cur || cur.outcome || cur.s.interruptible === "never") return;
    const c = this.takeDelivery(cur.s.interruptible);
    if (!c) return;
    this.leave(cur);
    this.advance(false, c);
  }

  private leave(cur: Current): void {
    this.current = null;
    const t = cur.teardown;
    cur.teardown = undefined;
    if (t) {
      try {
        t.call(cur.s);
      } catch (error) {
        this.emit({
          type: "error:suppressed",
          error,
          primary: undefined,
          context: `${cur.s.description}: teardown threw`,
        });
      }
    }
  }

  // ---- settling -------------------------------------------------------------------------------

  /**
   * A body that returned without its root frame ever being made (no child, scope, context read) and
   * without any cancellation (requests from outside do not make the root) has nothing to close, and
   * nothing that could make its value a swallow: it completes at once.
   */
  private settlesPlainly(): boolean {
    return !this.rootOpened && !this.isCancelling && !this.delivered;
  }

  /** The body returned `value` (`ok`) or threw it. Two arguments, not an Outcome, as for `advance`. */
  private bodySettled(ok: boolean, value: unknown): void {
    this.body = null;
    if (!this.rootOpened) {
      if (ok && this.settlesPlainly()) this.settle("completed", value);
      else this.settleFrom(ok, value, null);
      return;
    }
    const o: Outcome<T> = ok ? { ok: true, value: value as T } : { ok: false, error: value };
    while (this.top !== this.root) this.popFrame(this.top);
    const root = this.root;
    root.bodySettled = true;
    if (!o.ok && !isCancelled(o.error)) root.recordError(o.error);
    this.result = o;
    if (closeNext(root)) {
      const step = () => {
        if (closeNext(root)) root.waiter = step;
        else this.finish();
      };
      root.waiter = step;
    } else {
      this.finish();
    }
  }

  private finish(): void {
    if (this.isSettled) return;
    const o = this.result as Outcome<T>;
    let errors: unknown[] | null = null;
    if (this.rootOpened) {
      const root = this.root;
      root.closed = true;
      root.runCleanups();
      errors = root.errors;
    }
    if (o.ok) this.settleFrom(true, o.value, errors);
    else this.settleFrom(false, o.error, errors);
  }

  /**
   * Settles from the body's outcome (`ok` and `value`, or the error thrown) and the errors its
   * scopes recorded. Without a root frame there is no child, cleanup or recorded error: the body's
   * own outcome is all (a thrown error that is not `Cancelled` is then the one recorded).
   */
  private settleFrom(ok: boolean, value: unknown, recorded: unknown[] | null): void {
    const errors = recorded ?? (!this.rootOpened && !ok && !isCancelled(value) ? [value] : null);
    if (errors?.length) {
      const primary = errors[0];
      for (const later of errors.slice(1)) this.suppress(primary, later, "a later error in the same task");
      const outside = this.externalRequest();
      if (outside) this.emit({ type: "cancel:replaced", error: primary, reason: outside.reason });
      this.settle("failed", primary);
    } else if (!ok || this.firstRequest !== null) {
      const reason =
        this.externalRequest()?.reason ??
        this.firstRequest?.reason ??
        (!ok && isCancelled(value) ? value.reason : { kind: "cancel", at: this.clock.now() });
      if (ok && this.delivered) this.emit({ type: "cleanup:swallow", scope: null, reason });
      this.settle("cancelled", reason);
    } else {
      this.settle("completed", value);
    }
  }

  /** Appends `later` to `primary.suppressed` and reports it (semantics §2: never dropped). */
  suppress(primary: unknown, later: unknown, context: string): void {
    appendSuppressed(primary, later);
    this.emit({ type: "error:suppressed", error: later, primary, context });
  }

  /** Settles as `state` with `result`: the value, the error, or the `CancelReason`. */
  private settle(state: SettledState, result: unknown): void {
    this.flags |= STATE_BITS[state];
    this.result = result;
    this.clearCancellation();
    this.current = null;
    this.body = null;
    // A settled task keeps no frame: joiners hold it long after (a fan-in of 100k), so it stays small.
    this.root = this.top = settledFrame();
    if (this.runtime.listening) {
      this.emit({
        type: "task:settle",
        state,
        ...(state === "failed" ? { error: result } : {}),
        ...(state === "cancelled" ? { reason: result as CancelReason } : {}),
      });
    }
    if (this.owner) childSettled(this.owner, this);
    const callbacks = this.settledCallbacks;
    this.settledCallbacks = null;
    if (callbacks) for (let i = 0; i < callbacks.length; i++) callbacks[i]!();
  }

  /**
   * Gives up on a task that keeps swallowing its cancellation (semantics §5): its generator is never
   * resumed again, its frames' timers are cleared, its children cancelled and awaited.
   */
  protected abandon(): void {
    if (this.isSettled) return;
    this.abandonPending = false;
    // A body that has finished swallows nothing: the task only waits for its children, which were
    // cancelled when it finished and are bounded by their own budgets; it settles when they do,
    // with the errors it recorded (abandoning it here would report a wait on nothing and lose them).
    if (!this.hasBody) return;
    this.emit({
      type: "cleanup:abandon",
      waitingOn: this.current?.s.description ?? this.extras?.lastRefused ?? null,
    });
    const cur = this.current;
    if (cur) this.leave(cur);
    this.body = null;
    const live: TaskImpl<unknown>[] = [];
    const frames: Frame[] = [];
    for (let f: Frame | null = this.top; f; f = f.parent) {
      f.runCleanups();
      f.closed = true;
      f.waiter = null;
      if (f.children) live.push(...f.children);
      frames.push(f);
    }
    const external = this.externalRequest();
    const reason = external?.reason ?? {
      kind: "cleanup-overrun",
      at: this.clock.now(),
      message: "abandoned after swallowing its cancellation",
    };
    frames.reverse();
    // Still cancelling while its children finish, but no timer of its own may fire again.
    for (let u = this.lastUnwinding; u !== null; u = u.prev) {
      u.cancelTimer?.();
      u.cancelTimer = null;
    }
    this.clearRequests();
    const settleAbandoned = () => {
      // Errors recorded in its scopes (a child that failed, which started this unwinding, or one
      // that fails while it is awaited here) are still its outcome (semantics §2); the outermost
      // scope's first error is the primary.
      // One error can be recorded twice (a child's failure, then the body rethrowing it from a join).
      const errors = [...new Set(frames.flatMap((f) => f.errors ?? []))];
      if (errors.length === 0) {
        this.settle("cancelled", reason);
        return;
      }
      const primary = errors[0];
      for (const later of errors.slice(1)) this.suppress(primary, later, "a later error in the same task");
      if (external) this.emit({ type: "cancel:replaced", error: primary, reason: external.reason });
      this.settle("failed", primary);
    };
    let pending = live.length;
    const done = () => {
      if (--pending <= 0) settleAbandoned();
    };
    if (pending === 0) {
      settleAbandoned();
      return;
    }
    for (const child of live) {
      child.cancelFromOutside(reason);
      child.onSettled(done);
    }
  }

  /**
   * @internal Drops the task and its whole subtree without resuming any generator again: no
   * `finally` runs, every wait is left (its teardown runs), every frame's timers and cleanups go,
   * and each task settles `cancelled` with `reason`, children before their parents. For a runtime
   * that replays the subtree elsewhere (a durable workflow parked or handed to another process):
   * its unwinding happens in that later incarnation. The caller ends any task of the subtree whose
   * own cleanup must run (a step in flight) before it evicts.
   */
  evict(reason: CancelReason): void {
    if (this.isSettled) return;
    const order: TaskImpl<unknown>[] = [];
    const visit = (t: TaskImpl<unknown>) => {
      order.push(t);
      for (const child of t.liveChildren()) if (!child.isSettled) visit(child);
    };
    visit(this);
    // Detach every task first (top-down), so that no settle below wakes a body above.
    for (const t of order) t.detachForEviction();
    for (let i = order.length - 1; i >= 0; i--) {
      const t = order[i]!;
      if (!t.isSettled) t.settle("cancelled", reason);
    }
  }

  private detachForEviction(): void {
    this.abandonPending = false;
    const cur = this.current;
    if (cur) this.leave(cur);
    this.body = null;
    for (let f: Frame | null = this.top; f; f = f.parent) {
      f.runCleanups();
      f.closed = true;
      f.waiter = null;
      f.policy = null;
    }
    this.clearCancellation();
  }

  // ---- joining --------------------------------------------------------------------------------

  /** `onSettled` without a way to unregister: for a waiter that outlives the task or ignores late calls. */
  whenSettled(cb: () => void): void {
    if (this.isSettled) cb();
    // A literal for the first: a push would grow an empty array to 16 slots, for most tasks' one joiner.
    else if (this.settledCallbacks === null) this.settledCallbacks = [cb];
    else this.settledCallbacks.push(cb);
  }

  onSettled(cb: () => void): () => void {
    if (this.isSettled) {
      cb();
      return () => {};
    }
    this.whenSettled(cb);
    return () => {
      const list = this.settledCallbacks;
      const i = list ? list.indexOf(cb) : -1;
      if (i >= 0) list!.splice(i, 1);
    };
  }

  /** What a joiner gets: the value, the error, or `TaskCancelledError` (never `Cancelled`). */
  joinOutcome(): Outcome<T> {
    if ((this.flags & SETTLED_MASK) === COMPLETED) return { ok: true, value: this.result as T };
    return { ok: false, error: this.joinError() };
  }

  /** The value of a task that completed (check `settledState` first). */
  get completedValue(): T {
    return this.result as T;
  }

  /** What a join of this settled task throws, when it did not complete. */
  joinError(): unknown {
    if ((this.flags & SETTLED_MASK) === FAILED) return this.result;
    return new TaskCancelledError(this.path, this.result as CancelReason);
  }

  /**
   * Completes `event` with what every event carries (`at`, `taskId`, `path`, `rootId`) and hands it
   * on. `event` is the caller's own fresh object, completed in place (a copy per event cost more
   * than the listener's work once an OTel subscriber listens): callers pass a literal, and
   * `emitEvent` a copy of what it was given.
   */
  emit(event: KeelEventInput): void {
    if (!this.runtime.listening && !warningEvents.has(event.type)) return;
    const outer = emitting;
    emitting = this;
    try {
      const e = event as Writable<KeelEvent>;
      const runtime = this.runtime;
      e.at = this.clock.now();
      e.taskId = this.id;
      e.path = this.path;
      e.rootId = runtime.rootId;
      runtime.emit(e);
    } finally {
      emitting = outer;
    }
  }

  /** Every live child, across the task's frames (for snapshots and leak checks). */
  liveChildren(): TaskImpl<unknown>[] {
    const frames: Frame[] = [];
    for (let f: Frame | null = this.top; f; f = f.parent) frames.unshift(f);
    return frames.flatMap((f) => (f.children ? [...f.children] : []));
  }
}

/**
 * A child settled: unlink it, apply the frame's failure policy, and wake a scope waiting to exit
 * once its task children are all gone (and again as each resource goes: see `closeNext`).
 */
function childSettled(frame: Frame, child: TaskImpl<unknown>): void {
  frame.children?.delete(child);
  if (child.isResource) frame.countResource(-1);
  if (frame.policy) frame.policy.onChildSettled(child);
  else {
    // A shield consumes its task's outcome itself (semantics §6), so it never fails the owner.
    if (child.settledState === "failed" && !child.shielded) failFrame(frame, child.failure);
  }
  if (frame.waiter && (frame.children === null ? 0 : frame.children.size) === frame.liveResources) {
    const w = frame.waiter;
    frame.waiter = null;
    w();
  }
}

/**
 * A child's error fails its owner (semantics §2): the first one is the primary and cancels the
 * frame's region with reason `child-failed`; later ones are attached to it when the frame exits.
 */
export function failFrame(frame: Frame, error: unknown): void {
  const task = frame.task;
  if (!frame.recordError(error)) return;
  const reason: CancelReason = {
    kind: "child-failed",
    at: task.clock.now(),
    scope: frame.info,
    message: `a child of ${frame.label} failed`,
  };
  if (!frame.bodySettled && !frame.closed && !frame.request) task.request(frame, reason, false);
  else task.cancelRegionChildren(frame, reason);
}

/** The refusal a guard gives a wait (a guard that throws refuses with what it threw). */
function refuseWait(guard: WaitGuard, s: Suspension): unknown {
  try {
    return guard.check(s);
  } catch (error) {
    return error;
  }
}

function isSuspension(v: unknown): v is Suspension {
  return (
    typeof v === "object" &&
    v !== null &&
    (v as Suspension).kind === "suspend" &&
    typeof (v as Suspension).enter === "function"
  );
}

/**
 * `yield* task`. A task that has already settled is joined without suspending (only a cancellation
 * due for the joiner is delivered first); otherwise the joiner waits at a suspension point, which
 * is this object too. Written as an iterator, not a generator: joining is on every fan-in's hot path.
 */
/**
 * `yield* task`: a suspension until the task settles, and its own final iterator result (`done` and
 * `value`, read by `yield*` at once), so a join of a settled task makes one object.
 */
class JoinIterator<T>
  extends SuspensionClass<T>
  implements Iterator<unknown, T, unknown>, IteratorReturnResult<T>
{
  declare readonly interruptible: "normal";
  readonly done = true;
  value: T = undefined as T;
  private step: 0 | 1 | 2 = 0;
  constructor(private readonly task: TaskImpl<T>) {
    super();
    shapes.join = this;
  }
  next(answer?: unknown): IteratorResult<unknown, T> {
    if (this.step === 0) {
      if (this.task.isSettled) {
        this.step = 1;
        if (running === null) return ASK_TASK;
        answer = running;
      } else {
        this.step = 2;
        return { done: false, value: this };
      }
    }
    if (this.step === 1) {
      if (!(answer instanceof TaskImpl))
        throw new KeelError("KEEL_NO_TASK", "yield* task: must run inside a Keel task");
      answer.checkpoint();
      const task = this.task;
      if (task.settledState !== "completed") throw task.joinError();
      this.value = task.completedValue;
      return this;
    }
    this.value = answer as T;
    return this;
  }
  throw(error?: unknown): IteratorResult<unknown, T> {
    throw error;
  }
  return(value?: unknown): IteratorResult<unknown, T> {
    return { done: true, value: value as T };
  }
  get description(): string {
    return `join ${this.task.name}#${this.task.id}`;
  }
  waitDetail(): WaitDetail {
    return { kind: "join", taskId: this.task.id, name: this.task.name };
  }
  enterWith(waiter: Waiter<T>): () => void {
    return this.task.onSettled(() => waiter.resolve(this.task.joinOutcome()));
  }
}
suspensionClass(JoinIterator, "normal");
structuralWait(JoinIterator);

/**
 * The suspension a task waits at: resolved at most once, and then queued itself (a `Runnable`), so a
 * wait costs one object (and a resolve closure, for a suspension without `enterWith`).
 */
class Waiting implements Current {
  teardown: (() => void) | undefined = undefined;
  outcome: Outcome<unknown> | null = null;
  constructor(
    private readonly task: TaskImpl<unknown>,
    readonly s: Suspension,
    readonly since: number,
  ) {
    shapes.waiting = this;
  }
  get asyncContext(): AsyncContext {
    return this.task.runtime.asyncContext;
  }
  resolve(outcome: Outcome<unknown>): void {
    if (this.outcome || !this.task.isWaitingAt(this)) return;
    this.outcome = outcome;
    enqueue(this);
  }
  /** Queued once resolved (resume) and/or once a cancellation is requested (interrupt): whichever
   * runs first handles the wait; the other finds it gone and does nothing. */
  run(): void {
    if (this.outcome) this.task.resumeFrom(this);
    else this.task.tryInterrupt(this);
  }
}

function ignoreRejection(): void {}

let sharedSettledFrame: Frame | null = null;

/** The frame every settled task points at: closed, childless, shared. */
function settledFrame(): Frame {
  if (!sharedSettledFrame) {
    sharedSettledFrame = new Frame(
      null as unknown as TaskImpl<unknown>,
      null,
      "settled",
      "settled",
      0,
      Infinity,
      {},
    );
    sharedSettledFrame.closed = true;
    sharedSettledFrame.bodySettled = true;
  }
  return sharedSettledFrame;
}

/** The step method, as `setStepWatch` swaps it (a private method, reached through the prototype). */
interface Stepping {
  advance(this: TaskImpl<unknown>, ok: boolean, value: unknown): void;
}
const steppingProto = TaskImpl.prototype as unknown as Stepping;
const plainAdvance = steppingProto.advance;
let stepWatch: StepWatch | null = null;

/**
 * @internal Installs (or, with null, removes) the step watch; returns the one it replaced. While one
 * is installed, the task's step method is a timed wrapper of the plain one: swapped on the
 * prototype, so with no watch the kernel runs exactly its plain code, with no check per step.
 */
export function setStepWatch(watch: StepWatch | null): StepWatch | null {
  const before = stepWatch;
  stepWatch = watch;
  steppingProto.advance = watch === null ? plainAdvance : timedAdvance(watch);
  return before;
}

function timedAdvance(watch: StepWatch): Stepping["advance"] {
  return function advance(this: TaskImpl<unknown>, ok: boolean, value: unknown): void {
    const from = watch.now();
    plainAdvance.call(this, ok, value);
    const tookMs = watch.now() - from;
    if (tookMs >= watch.thresholdMs)
      this.emit({ type: "task:blocked", durationMs: Math.round(tookMs), thresholdMs: watch.thresholdMs });
  };
}

/** `T` with its properties assignable (an event completed in place by `emit`). */
type Writable<T> = { -readonly [K in keyof T]: T[K] };

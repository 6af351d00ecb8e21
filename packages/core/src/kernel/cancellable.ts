/**
 * The cancellation half of a task: the requests counted against it (the counting rule), the
 * unwindings that delivered `Cancelled` with their cleanup budgets, and its stack of frames with the
 * deadlines in force. `TaskImpl` adds the driver, settling and joining on top.
 * @module
 */

import type { KeelEventInput } from "../observe/events.js";
import { Cancelled, type CancelReason } from "./cancelled.js";
import type { Clock } from "./clock.js";
import type { ContextValues } from "./context-values.js";
import { type CancelRequest, Frame, sequence, type Unwinding } from "./frame.js";
import type { Interruptible, Outcome, Suspension } from "./operation.js";
import { enqueue, type Runnable, whenDrained } from "./scheduler.js";
import type { TreeTask } from "./tree-task.js";

export const CLOCK_KEY: unique symbol = Symbol("keel.clock");
export const BUDGET_KEY: unique symbol = Symbol("keel.cleanup-budget");
export const DEFAULT_CLEANUP_BUDGET_MS = 5000;
/** After a cut, this many immediate throws (a loop that keeps swallowing) abandon the task at once. */
export const HARD_THROW_LIMIT = 1000;

export interface Current extends Runnable {
  readonly s: Suspension;
  readonly since: number;
  teardown: (() => void) | undefined;
  outcome: Outcome<unknown> | null;
  /** Queued to resume (once resolved) or to take a delivery (before). */
  run(): void;
}

const DELIVERED = 8;
const ABANDON_PENDING = 16;

const NO_REQUESTS: CancelRequest[] = Object.freeze([]) as unknown as CancelRequest[];
const NO_UNWINDINGS: Unwinding[] = Object.freeze([]) as unknown as Unwinding[];

// Unwindings delivered during the current drain, whose budget timers wait for its end (pairs).
const budgetsAfterDrain: Array<CancellableTask | Unwinding> = [];

/** Not delivered yet, its frame still on the stack, and fresh for the unwinding in progress (if any). */
function deliverable(r: CancelRequest, last: Unwinding | null): boolean {
  if (r.deliveredIn) return false;
  const f = r.frame;
  // The root (it enters at sequence 0) is older than every unwinding, and closes only when the task
  // finishes: so its request is fresh only when no unwinding is in progress.
  if (f === null) return last === null;
  return !f.closed && (!last || f.entrySeq > last.seq);
}

function armAfterDrain(task: CancellableTask, u: Unwinding): void {
  if (budgetsAfterDrain.length === 0) whenDrained(flushBudgets);
  budgetsAfterDrain.push(task, u);
}

function flushBudgets(): void {
  // Arming schedules timers only, never adds here: the list is read in place and then emptied.
  // Each timer is armed in its task's async context (a host timer keeps the one it was armed in):
  // what the budget's end runs, a teardown or an `onEvent` handler, must see the task's.
  const list = budgetsAfterDrain;
  let i = 0;
  while (i < list.length) i = (list[i] as TreeTask).asyncContext.runInAsyncScope(armBudgets, null, i);
  list.length = 0;
}

/** Arms the budgets from pair `i` on while their tasks share its async context; returns where it stopped. */
function armBudgets(i: number): number {
  const list = budgetsAfterDrain;
  const context = (list[i] as TreeTask).asyncContext;
  do {
    (list[i] as CancellableTask).armBudget(list[i + 1] as Unwinding);
    i += 2;
  } while (i < list.length && (list[i] as TreeTask).asyncContext === context);
  return i;
}

export abstract class CancellableTask {
  /**
   * The task's own frame, made on first use (`openRoot`): a spawned task waits in the run queue
   * without one, so a fan-out of 100k children does not keep 100k frames alive before they run.
   */
  private rootFrame: Frame | null = null;
  /** Invariant: the innermost frame (null only while `rootFrame` is); its chain ends at the root. */
  private topFrame: Frame | null = null;
  /** Invariant: every request here belongs to a frame on the stack (or is external). */
  /** Empty shared arrays until the first request: most tasks are never cancelled, so they never pay for them. */
  requests: CancelRequest[] = NO_REQUESTS;
  unwinding: Unwinding[] = NO_UNWINDINGS;
  /** The suspension the task waits at, or null while it runs or waits for its children. */
  protected current: Current | null = null;
  /** Bits: the subclass's (below 8) and `DELIVERED`, `ABANDON_PENDING`; one field keeps tasks small. */
  protected flags = 0;
  /** True once any `Cancelled` was delivered (a normal return is then a swallow). */
  protected get delivered(): boolean {
    return (this.flags & DELIVERED) !== 0;
  }
  protected set delivered(on: boolean) {
    this.flags = on ? this.flags | DELIVERED : this.flags & ~DELIVERED;
  }
  protected hardThrows = 0;
  protected get abandonPending(): boolean {
    return (this.flags & ABANDON_PENDING) !== 0;
  }
  protected set abandonPending(on: boolean) {
    this.flags = on ? this.flags | ABANDON_PENDING : this.flags & ~ABANDON_PENDING;
  }

  get root(): Frame {
    return this.rootFrame ?? this.openRoot();
  }
  set root(frame: Frame) {
    this.rootFrame = frame;
  }
  get top(): Frame {
    return this.topFrame ?? this.openRoot();
  }
  set top(frame: Frame) {
    this.topFrame = frame;
  }

  /** True once the root frame exists (a request, a scope, a child or a context read made it). */
  protected get rootOpened(): boolean {
    return this.rootFrame !== null;
  }

  /** Makes the root frame and sets both `root` and `top` to it. */
  protected abstract openRoot(): Frame;
  /** The context values the root frame is (or will be) made with. */
  protected abstract get rootContextValues(): ContextValues;

  /** The contexts in force at the top of the stack, without making the root frame for it. */
  protected contextsNow(): ContextValues {
    return this.topFrame !== null ? this.topFrame.contexts : this.rootContextValues;
  }
  abstract get clock(): Clock;
  abstract get isSettled(): boolean;
  /** False once the generator has finished (the task may still wait for its children). */
  protected abstract get hasBody(): boolean;
  abstract emit(event: KeelEventInput): void;
  /** True when events beyond warnings have a listener (so building them is worth it). */
  protected abstract get listening(): boolean;
  abstract tryInterrupt(cur: Current): void;
  protected abstract abandon(): void;

  // ---- cancellation ---------------------------------------------------------------------------

  /**
   * Counts a request against this task and cancels the children in the frame's region at once
   * (semantics §3: a whole subtree unwinds concurrently). Delivery happens at a suspension point.
   */
  request(frame: Frame | null, reason: CancelReason, external: boolean): void {
    if (this.isSettled || this.abandonPending) return;
    // From outside, a request belongs to the root: it is recorded as null, so that cancelling a
    // task that never needed its root frame (parked in `suspend()`, say) does not make one.
    // `reason.at` is when the request is counted: a reason is made for its request, and the cascade
    // to the region's children is synchronous (no clock read here: cancelling 10k tasks is a bench row).
    const r: CancelRequest = {
      frame: external ? null : frame,
      reason,
      external,
      deliveredIn: null,
      since: reason.at,
    };
    // A literal, not `[]` then push: a push grows an empty array to 16 slots, for a list of one.
    if (this.requests === NO_REQUESTS) this.requests = [r];
    else this.requests.push(r);
    if (!external) frame!.request = r;
    if (this.listening)
      this.emit({ type: "cancel:request", reason, owner: external ? "outside" : frame!.info });
    this.cancelRegionChildren(external ? null : frame, reason);
    const cur = this.current;
    if (cur && !cur.outcome && cur.s.interruptible === "normal") enqueue(cur);
  }

  /**
   * Cancels, from outside, every child owned by `frame` or a frame nested in it, except shields
   * (they filter outside cancellation) and resources (they are torn down when their scope exits,
   * after the body's own cleanup, which may still use them: semaphore permits, an HTTP pool).
   */
  cancelRegionChildren(frame: Frame | null, reason: CancelReason): void {
    // null: the root's region, the whole stack (and no frame yet means no child anywhere).
    if (frame === null ? this.topFrame === null : frame.closed) return;
    for (let f: Frame | null = this.top; f; f = f.parent) {
      // Walked in place (no copy): a request never settles a child synchronously, it only queues
      // its delivery; `next` is read first all the same.
      let next = f.children ? f.children.first : null;
      for (let child = next; child; child = next) {
        next = child.nextSibling;
        if (!child.shielded && !child.isResource) child.cancelFromOutside(reason);
      }
      if (f === frame) break;
    }
  }

  /** A request from outside this task: never withdrawn, so the task ends cancelled (or failed). */
  cancelFromOutside(reason: CancelReason): void {
    if (this.isSettled || this.externalRequest()) return;
    this.request(null, reason, true);
  }

  /** Throws `Cancelled` here if one is due (entering any Keel operation delivers pending ones). */
  checkpoint(): void {
    const c = this.takeDelivery("normal");
    // Once abandonment is due, the operation goes on to its suspension point, where the runtime
    // has control and abandons the task: thrown here, the signal would feed a loop that catches
    // it and enters the operation again without ever yielding (a synchronous infinite loop).
    if (c && !this.abandonPending) throw c;
  }

  /**
   * The `Cancelled` to throw at a suspension point of this kind, if any, marking what it delivers.
   * Picks the outermost deliverable request, so the reason seen is the claim that will win.
   */
  takeDelivery(level: Interruptible): Cancelled | null {
    if (level === "never" || (this.requests.length === 0 && this.unwinding.length === 0)) return null;
    // A cut deferred while the task waited for its children applies at its first step of its own.
    // Indexed loops here and below: for-of allocates an iterator wherever V8 does not optimize the
    // caller, and these run on every delivery.
    const unwinding = this.unwinding;
    for (let i = 0; i < unwinding.length; i++) {
      const u = unwinding[i]!;
      if (u.cutDeferred && this.hasBody) this.cut(u);
    }
    for (let i = 0; i < unwinding.length; i++) {
      const u = unwinding[i]!;
      if (u.hardCancelled) {
        if (++this.hardThrows > HARD_THROW_LIMIT) this.abandonPending = true;
        return u.hardCancelled;
      }
    }
    if (level !== "normal" || this.requests.length === 0) return null;
    const last = this.unwinding.length > 0 ? this.unwinding[this.unwinding.length - 1]! : null;
    // The outermost deliverable request; depths are walked only when there is a choice to make.
    let best: CancelRequest | null = null;
    let bestDepth = -1;
    const requests = this.requests;
    for (let i = 0; i < requests.length; i++) {
      const r = requests[i]!;
      if (!deliverable(r, last)) continue;
      if (!best) {
        best = r;
        continue;
      }
      if (bestDepth < 0) bestDepth = best.frame?.depth ?? 0;
      const d = r.frame?.depth ?? 0;
      if (d < bestDepth) {
        best = r;
        bestDepth = d;
      }
    }
    if (!best) return null;
    const now = this.clock.now();
    const budgetMs = (this.contextsNow()[BUDGET_KEY] as number | undefined) ?? DEFAULT_CLEANUP_BUDGET_MS;
    // The budget runs from the earliest request delivered here, not from the delivery (semantics §5:
    // a delivery deferred by a wait for children must not add a budget; the cut applies on arrival).
    let at = now;
    for (let i = 0; i < requests.length; i++) {
      const r = requests[i]!;
      if (r.since < at && deliverable(r, last)) at = r.since;
    }
    const u: Unwinding = {
      seq: sequence(),
      cancelled: new Cancelled(best.reason),
      at,
      budgetMs,
      cleanupDeadline: Math.min(at + budgetMs, last ? last.cleanupDeadline : Infinity),
      carried: 0,
      hardCancelled: null,
      cutDeferred: false,
      cancelTimer: null,
    };
    for (let i = 0; i < requests.length; i++) {
      const r = requests[i]!;
      if (deliverable(r, last)) {
        r.deliveredIn = u;
        u.carried++;
      }
    }
    if (this.unwinding === NO_UNWINDINGS) this.unwinding = [u];
    else this.unwinding.push(u);
    this.delivered = true;
    // Most cleanups finish within the drain that delivered them: arm the budget timer only for an
    // unwinding still going once the drain is over (it is due at the same instant either way).
    armAfterDrain(this, u);
    return u.cancelled;
  }

  /**
   * The task leaves a wait at a shield whose limit is `limitAt`: requests counted during the wait
   * start their budget when it ended, or at the limit if that came first (semantics §6: the caller
   * keeps waiting for the shielded work, which its limit bounds; that time is not cleanup).
   */
  shieldWaitEnded(limitAt: number): void {
    const requests = this.requests;
    if (requests.length === 0) return;
    const from = Math.min(this.clock.now(), limitAt);
    for (let i = 0; i < requests.length; i++) {
      const r = requests[i]!;
      if (!r.deliveredIn && r.since < from) r.since = from;
    }
  }

  /** The request from outside the task, if one is counted (there is at most one). */
  externalRequest(): CancelRequest | null {
    const requests = this.requests;
    for (let i = 0; i < requests.length; i++) if (requests[i]!.external) return requests[i]!;
    return null;
  }

  /** @internal Arms the cleanup-budget timer of `u` if the unwinding outlived its drain. */
  armBudget(u: Unwinding): void {
    if (this.isSettled || u.cancelTimer || u.hardCancelled || !this.unwinding.includes(u)) return;
    u.cancelTimer = this.clock.schedule(u.at + u.budgetMs, () => this.cut(u));
  }

  /** The cleanup budget ran out: cut the pending step, then abandon one budget later. */
  protected cut(u: Unwinding): void {
    if (this.isSettled || !this.unwinding.includes(u)) return;
    // Time spent waiting for children is bounded by their own budgets; the cut is for this task's
    // own code, so it waits until the task runs again (and never comes once the body has finished).
    u.cutDeferred = !this.hasBody || (this.current !== null && this.current.s.interruptible === "never");
    if (u.cutDeferred) return;
    const now = this.clock.now();
    u.hardCancelled = new Cancelled({
      kind: "cleanup-overrun",
      at: now,
      message: `cleanup exceeded its budget of ${u.budgetMs} ms`,
    });
    this.emit({
      type: "cleanup:overrun",
      budgetMs: u.budgetMs,
      waitingOn: this.current?.s.description ?? null,
    });
    // Abandoned one budget after a cut on time, and at once after one deferred past that (a task
    // hard-cancelled finishes within its next steps): by two budgets from the request either way.
    u.cancelTimer = this.clock.schedule(Math.max(now, u.at + 2 * u.budgetMs), () => this.abandon());
    const cur = this.current;
    if (cur && !cur.outcome) enqueue(cur);
  }

  /** Removes a request; an unwinding whose requests are all withdrawn has ended. */
  withdraw(r: CancelRequest): void {
    const i = this.requests.indexOf(r);
    if (i >= 0) this.requests.splice(i, 1);
    if (r.frame !== null && r.frame.request === r) r.frame.request = null;
    const u = r.deliveredIn;
    if (u && i >= 0 && --u.carried === 0) this.endUnwinding(u);
  }

  /** Forgets every request and unwinding (the task has settled or been abandoned). */
  protected clearCancellation(): void {
    const unwinding = this.unwinding;
    for (let i = 0; i < unwinding.length; i++) unwinding[i]!.cancelTimer?.();
    this.unwinding = NO_UNWINDINGS;
    this.requests = NO_REQUESTS;
  }

  protected endUnwinding(u: Unwinding): void {
    const i = this.unwinding.indexOf(u);
    if (i >= 0) this.unwinding.splice(i, 1);
    u.cancelTimer?.();
    u.cancelTimer = null;
    if (!this.unwinding.some((x) => x.hardCancelled)) this.hardThrows = 0;
  }

  /**
   * A `Cancelled` leaves `frame` unconverted: the enclosing requests that prevented the conversion
   * now travel with it, so they are not delivered a second time (semantics §3: at most once).
   */
  adoptEnclosing(frame: Frame, c: unknown): void {
    const u = this.unwinding.find((x) => x.cancelled === c) ?? this.unwinding[this.unwinding.length - 1];
    if (!u) return;
    for (const r of this.requests) {
      // A null frame is the root's, which encloses every frame (and `frame` is never the root).
      if (!r.deliveredIn && r.frame !== frame && (r.frame === null || r.frame.encloses(frame))) {
        r.deliveredIn = u;
        u.carried++;
      }
    }
  }

  /** The `Cancelled` in flight, for an operation that must rethrow one (a swallowed claim). */
  inFlightCancelled(): Cancelled | null {
    const n = this.unwinding.length;
    return n > 0 ? this.unwinding[n - 1]!.cancelled : null;
  }

  /** True while any cancellation is in flight against the task (counted or unwinding). */
  get isCancelling(): boolean {
    return this.requests.length > 0 || this.unwinding.length > 0;
  }

  // ---- frames and deadlines -------------------------------------------------------------------

  /** The deadline in force now: during cleanup, the cleanup deadline lowered by fresh scopes. */
  effectiveDeadline(): number {
    // Length first: reading index -1 of an empty array is a slow, generic property lookup.
    const n = this.unwinding.length;
    if (n === 0) return this.top.deadline;
    const last = this.unwinding[n - 1]!;
    if (this.top.entrySeq > last.seq) return this.top.deadline;
    return last.cleanupDeadline;
  }

  pushFrame(kind: string, label: string, ownDeadline = Infinity): Frame {
    const parent = this.top;
    const deadline = Math.min(ownDeadline, this.effectiveDeadline());
    const f = new Frame(
      this as unknown as TreeTask,
      parent,
      kind,
      label,
      this.requests.length,
      deadline,
      parent.contexts,
    );
    this.top = f;
    return f;
  }

  /** Pops `frame` (which must be the top) and runs its cleanups. */
  popFrame(frame: Frame): void {
    if (this.top !== frame)
      throw new Error(`Keel internal error: popping ${frame.label}, top is ${this.top.label}`);
    this.top = frame.parent!;
    frame.closed = true;
    frame.runCleanups();
  }
}

/**
 * The cancellation half of a task: the requests counted against it (the counting rule), the
 * unwindings that delivered `Cancelled` with their cleanup budgets, and its stack of frames with the
 * deadlines in force. `TaskImpl` adds the driver, settling and joining on top.
 * @module
 */

import { roundMs } from "../format-value.js";
import type { KeelEventInput } from "../observe/events.js";
import { Cancelled, type CancelReason } from "./cancelled.js";
import type { Clock } from "./clock.js";
import type { ContextValues } from "./context-values.js";
import {
  type CancelRequest,
  cleanupDeadlineOf,
  Frame,
  isExternal,
  sequence,
  sinceOf,
  type Unwinding,
} from "./frame.js";
import type { Interruptible, Outcome, Suspension } from "./operation.js";
import { enqueue, type Runnable, whenDrained } from "./scheduler.js";
import type { TreeTask } from "./tree-task.js";

export const CLOCK_KEY: unique symbol = Symbol("keel.clock");
export const BUDGET_KEY: unique symbol = Symbol("keel.cleanup-budget");
/** The wait guard in force (see `wait-guard.ts`): null or absent where none is. */
export const WAIT_GUARD_KEY: unique symbol = Symbol("keel.wait-guard");
/**
 * The latest instant any cleanup in a region may end, whoever started it: a shield gives its work
 * its limit plus one cleanup budget (never more than an enclosing shield's), so that cleanups which
 * start one another across tasks (a cut that cancels shielded work, whose `finally` enters a shield)
 * cannot each add a budget (semantics §6: settled within the outermost limit plus one budget).
 */
export const CLEANUP_CAP_KEY: unique symbol = Symbol("keel.cleanup-cap");
export const DEFAULT_CLEANUP_BUDGET_MS = 5000;
/**
 * After a cut, this many immediate throws abandon the task at once: past them it is a loop that keeps
 * swallowing, not a stack of `finally` blocks unwinding (each of those takes one throw, and a task's
 * stack holds far fewer that suspend). Sized to the stack, not to "a loop": every throw is
 * synchronous work in the drain that settles all of a scope's children, so N swallowing siblings cost
 * N x this many throws (about 1 us each) before any of them settles. At 1000, 100 such children
 * settled 130 ms past their 300 ms cut on an idle machine (830 ms past on a loaded one, issue 23)
 * and 500 of them 560 ms past (real clock); at 32, 100 of them 20 ms and 500 of them 40 ms past.
 */
export const HARD_THROW_LIMIT = 32;

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

// Tasks that delivered a cancellation during the current drain: their budget timers wait for its
// end. Slots [0, budgetCount) are live; the array keeps its capacity between drains (a cascade that
// cancels 10k tasks would otherwise grow it from empty every time) up to `KEEP_BUDGET_SLOTS`.
const budgetsAfterDrain: Array<CancellableTask | null> = [];
let budgetCount = 0;
const KEEP_BUDGET_SLOTS = 1 << 15;

/** Not delivered yet, its frame still on the stack, and fresh for the unwinding in progress (if any). */
function deliverable(r: CancelRequest, last: Unwinding | null): boolean {
  if (r.deliveredIn) return false;
  const f = r.frame;
  // The root (it enters at sequence 0) is older than every unwinding, and closes only when the task
  // finishes: so its request is fresh only when no unwinding is in progress.
  if (f === null) return last === null;
  return !f.closed && (!last || f.entrySeq > last.seq);
}

function armAfterDrain(task: CancellableTask): void {
  if (budgetCount === 0) whenDrained(flushBudgets);
  budgetsAfterDrain[budgetCount++] = task;
}

function flushBudgets(): void {
  // Arming schedules timers only, never adds here: the list is read in place and then emptied.
  // Each timer is armed in its task's async context (a host timer keeps the one it was armed in):
  // what the budget's end runs, a teardown or an `onEvent` handler, must see the task's.
  const list = budgetsAfterDrain;
  const n = budgetCount;
  let i = 0;
  while (i < n) i = (list[i] as unknown as TreeTask).asyncContext.runInAsyncScope(armBudgets, null, i);
  budgetCount = 0;
  if (list.length > KEEP_BUDGET_SLOTS) list.length = 0;
  else list.fill(null, 0, n);
}

/** Arms the budgets from slot `i` on while their tasks share its async context; returns where it stopped. */
function armBudgets(i: number): number {
  const list = budgetsAfterDrain;
  const n = budgetCount;
  const context = (list[i] as unknown as TreeTask).asyncContext;
  do {
    list[i]!.armBudgets();
    i++;
  } while (i < n && (list[i] as unknown as TreeTask).asyncContext === context);
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
  /**
   * The requests counted against the task, oldest first, linked by `next` (a list, not an array:
   * most tasks are never cancelled, and a cancelled one needs no array for its one request).
   * Invariant: every request here belongs to a frame on the stack (or is external).
   */
  firstRequest: CancelRequest | null = null;
  /** The newest unwinding in progress, linked to older ones by `prev` (and back by `next`). */
  lastUnwinding: Unwinding | null = null;
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
  /** The context values the root frame is (or will be) made with; kept once the task settles. */
  abstract get rootContextValues(): ContextValues;

  /** The contexts in force at the top of the stack, without making the root frame for it. */
  contextsNow(): ContextValues {
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
      deliveredIn: null,
      since: null,
      next: null,
    };
    let tail = this.firstRequest;
    if (tail === null) this.firstRequest = r;
    else {
      while (tail.next !== null) tail = tail.next;
      tail.next = r;
    }
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
    const last = this.lastUnwinding;
    if (level === "never" || (this.firstRequest === null && last === null)) return null;
    // A cut deferred while the task waited for its children applies at its first step of its own.
    if (last !== null) {
      // The oldest hard cancellation is thrown (the list is walked from the newest).
      let hard: Unwinding | null = null;
      for (let u: Unwinding | null = last; u !== null; u = u.prev) {
        if (u.cutDeferred && this.hasBody) this.cut(u);
        if (u.hardCancelled) hard = u;
      }
      if (hard) {
        if (++hard.hardThrows > HARD_THROW_LIMIT) this.abandonPending = true;
        return hard.hardCancelled;
      }
    }
    if (level !== "normal" || this.firstRequest === null) return null;
    // The outermost deliverable request (the first of equals); depths are walked only when there is
    // a choice to make. The budget runs from the earliest one (semantics §5: a delivery deferred by a
    // wait for children must not add a budget; a cut due already applies on arrival); every request
    // was counted before now, so no clock read is needed for it.
    let best: CancelRequest | null = null;
    let bestDepth = -1;
    let from: CancelRequest | null = null;
    for (let r: CancelRequest | null = this.firstRequest; r !== null; r = r.next) {
      if (!deliverable(r, last)) continue;
      if (from === null || sinceOf(r) < sinceOf(from)) from = r;
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
    if (!best || !from) return null;
    const contexts = this.contextsNow();
    const budgetMs = (contexts[BUDGET_KEY] as number | undefined) ?? DEFAULT_CLEANUP_BUDGET_MS;
    // The cleanup ends by the earlier of an enclosing unwinding's deadline and the region's cap.
    const regionCap = contexts[CLEANUP_CAP_KEY] as number | undefined;
    let capAt = last ? cleanupDeadlineOf(last) : null;
    if (regionCap !== undefined && (capAt === null || regionCap < capAt)) capAt = regionCap;
    const u: Unwinding = {
      seq: sequence(),
      cancelled: new Cancelled(best.reason),
      from,
      budgetMs,
      capAt,
      carried: 0,
      hardCancelled: null,
      hardThrows: 0,
      cutDeferred: false,
      cancelTimer: null,
      prev: last,
    };
    for (let r: CancelRequest | null = this.firstRequest; r !== null; r = r.next) {
      if (deliverable(r, last)) {
        r.deliveredIn = u;
        u.carried++;
      }
    }
    this.lastUnwinding = u;
    this.delivered = true;
    // No budget timer yet: most cleanups finish in the step that delivered them, without
    // suspending. See `cleanupWaits`, which arms it once a cleanup does wait.
    return u.cancelled;
  }

  /**
   * The task suspends: if a cleanup is in progress without its budget timer, the timer is armed
   * once the current drain is over, for the unwindings still in progress then (it is due at the
   * same instant either way; a cleanup that waits only for a step of this drain never needs one).
   * A cleanup that never suspends needs no timer: nothing but a step of its own could cut it.
   */
  protected cleanupWaits(): void {
    const u = this.lastUnwinding;
    if (u !== null && u.cancelTimer === null && u.hardCancelled === null) armAfterDrain(this);
  }

  /** The oldest unwinding in progress, or null. */
  firstUnwinding(): Unwinding | null {
    let u = this.lastUnwinding;
    if (u === null) return null;
    while (u.prev !== null) u = u.prev;
    return u;
  }

  /** True while `u` is one of the task's unwindings in progress. */
  private hasUnwinding(u: Unwinding): boolean {
    for (let x = this.lastUnwinding; x !== null; x = x.prev) if (x === u) return true;
    return false;
  }

  /**
   * The task leaves a wait at a shield whose limit is `limitAt`: requests counted during the wait
   * start their budget when it ended, or at the limit if that came first (semantics §6: the caller
   * keeps waiting for the shielded work, which its limit bounds; that time is not cleanup).
   */
  shieldWaitEnded(limitAt: number): void {
    if (this.firstRequest === null) return;
    const from = Math.min(this.clock.now(), limitAt);
    for (let r: CancelRequest | null = this.firstRequest; r !== null; r = r.next)
      if (!r.deliveredIn && sinceOf(r) < from) r.since = from;
  }

  /** The request from outside the task, if one is counted (there is at most one). */
  externalRequest(): CancelRequest | null {
    for (let r: CancelRequest | null = this.firstRequest; r !== null; r = r.next) if (isExternal(r)) return r;
    return null;
  }

  /** @internal Arms the cleanup-budget timers of the unwindings that outlived their drain. */
  armBudgets(): void {
    if (this.isSettled) return;
    for (let u = this.lastUnwinding; u !== null; u = u.prev) {
      if (u.cancelTimer || u.hardCancelled) continue;
      const unwinding = u;
      // At the instant the budget ends, not a budget from now: a timer armed late (after a busy
      // drain) or a cap already near must not move the cut.
      u.cancelTimer = this.clock.schedule(cleanupDeadlineOf(u), () => this.cut(unwinding));
    }
  }

  /** The cleanup budget ran out: cut the pending step, then abandon one budget later. */
  protected cut(u: Unwinding): void {
    if (this.isSettled || !this.hasUnwinding(u)) return;
    // Time spent waiting for children is bounded by their own budgets; the cut is for this task's
    // own code, so it waits until the task runs again (and never comes once the body has finished).
    u.cutDeferred = !this.hasBody || (this.current !== null && this.current.s.interruptible === "never");
    if (u.cutDeferred) return;
    const now = this.clock.now();
    const dueAt = cleanupDeadlineOf(u);
    u.hardCancelled = new Cancelled({
      kind: "cleanup-overrun",
      // When the budget ran out, not when its timer got to run: shielded work this cut cancels
      // counts its own budget from here, so a late timer's lag is not passed down the chain.
      at: Math.min(now, dueAt),
      message: `cleanup exceeded its budget of ${roundMs(u.budgetMs)} ms`,
    });
    this.emit({
      type: "cleanup:overrun",
      budgetMs: u.budgetMs,
      waitingOn: this.current?.s.description ?? null,
    });
    // Abandoned one budget after a cut on time, and at once after one deferred past that (a task
    // hard-cancelled finishes within its next steps): by one budget after its cleanup deadline
    // either way (two from the request, or the region's cap plus one).
    u.cancelTimer = this.clock.schedule(Math.max(now, dueAt + u.budgetMs), () => this.abandon());
    const cur = this.current;
    if (cur && !cur.outcome) enqueue(cur);
  }

  /** Removes a request; an unwinding whose requests are all withdrawn has ended. */
  withdraw(r: CancelRequest): void {
    let found = false;
    if (this.firstRequest === r) {
      this.firstRequest = r.next;
      found = true;
    } else {
      for (let p = this.firstRequest; p !== null; p = p.next) {
        if (p.next === r) {
          p.next = r.next;
          found = true;
          break;
        }
      }
    }
    if (found) r.next = null;
    if (r.frame !== null && r.frame.request === r) r.frame.request = null;
    const u = r.deliveredIn;
    if (u && found && --u.carried === 0) this.endUnwinding(u);
  }

  /** Forgets every request and unwinding (the task has settled or been abandoned). */
  protected clearCancellation(): void {
    for (let u = this.lastUnwinding; u !== null; u = u.prev) u.cancelTimer?.();
    this.lastUnwinding = null;
    this.firstRequest = null;
  }

  /** Forgets the requests only (an abandoned task: its unwindings stay, for its state). */
  protected clearRequests(): void {
    this.firstRequest = null;
  }

  /** The number of requests counted against the task (the counting rule's count). */
  get requestCount(): number {
    let n = 0;
    for (let r = this.firstRequest; r !== null; r = r.next) n++;
    return n;
  }

  protected endUnwinding(u: Unwinding): void {
    if (this.lastUnwinding === u) this.lastUnwinding = u.prev;
    else {
      for (let x = this.lastUnwinding; x !== null; x = x.prev) {
        if (x.prev === u) {
          x.prev = u.prev;
          break;
        }
      }
    }
    u.cancelTimer?.();
    u.cancelTimer = null;
  }

  /**
   * A `Cancelled` leaves `frame` unconverted: the enclosing requests that prevented the conversion
   * now travel with it, so they are not delivered a second time (semantics §3: at most once).
   */
  adoptEnclosing(frame: Frame, c: unknown): void {
    let u = this.lastUnwinding;
    for (let x = u; x !== null; x = x.prev) {
      if (x.cancelled === c) {
        u = x;
        break;
      }
    }
    if (!u) return;
    for (let r: CancelRequest | null = this.firstRequest; r !== null; r = r.next) {
      // A null frame is the root's, which encloses every frame (and `frame` is never the root).
      if (!r.deliveredIn && r.frame !== frame && (r.frame === null || r.frame.encloses(frame))) {
        r.deliveredIn = u;
        u.carried++;
      }
    }
  }

  /** The `Cancelled` in flight, for an operation that must rethrow one (a swallowed claim). */
  inFlightCancelled(): Cancelled | null {
    return this.lastUnwinding !== null ? this.lastUnwinding.cancelled : null;
  }

  /** True while any cancellation is in flight against the task (counted or unwinding). */
  get isCancelling(): boolean {
    return this.firstRequest !== null || this.lastUnwinding !== null;
  }

  // ---- frames and deadlines -------------------------------------------------------------------

  /** The deadline in force now: during cleanup, the cleanup deadline lowered by fresh scopes. */
  effectiveDeadline(): number {
    const last = this.lastUnwinding;
    if (last === null || this.top.entrySeq > last.seq) return this.top.deadline;
    return cleanupDeadlineOf(last);
  }

  pushFrame(kind: string, label: string, ownDeadline = Infinity): Frame {
    const parent = this.top;
    const deadline = Math.min(ownDeadline, this.effectiveDeadline());
    const f = new Frame(
      this as unknown as TreeTask,
      parent,
      kind,
      label,
      this.requestCount,
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
// A task is a promise (docs/guide/task-tree.md): `task instanceof Promise` holds. `TaskImpl` defines
// `then`, `catch`, `finally` and the tag itself (on its own promise, made on first use); the chain
// through `Promise.prototype` only answers `instanceof`, at no cost per task.
Object.setPrototypeOf(CancellableTask.prototype, Promise.prototype);

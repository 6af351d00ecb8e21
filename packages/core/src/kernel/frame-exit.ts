/**
 * How a scope ends: cancel and await its task children, then tear down its resources, newest first
 * (semantics §2), then apply the counting rule (semantics §3).
 * @module
 */
import { Cancelled, type CancelReason, isCancelled } from "./cancelled.js";
import type { Frame } from "./frame.js";
import {
  type Instruction,
  type Outcome,
  SuspensionClass,
  structuralWait,
  suspensionClass,
  type Waiter,
} from "./operation.js";
import { shapes } from "./shapes.js";
import type { TreeTask } from "./tree-task.js";

/**
 * Ends `frame` with its operation's `outcome`: cancels the task children still running (reason
 * `parent`) and waits for all of them, then tears down its resources one by one, the newest first
 * (each bounded by its own cleanup budget), then returns the value or throws the scope's outcome. `convert` makes the scope's own error (a `TimeoutError`) when its request is
 * the one being unwound.
 */
export function exitFrame<T>(
  task: TreeTask,
  frame: Frame,
  outcome: Outcome<T>,
  convert?: () => Error,
): Iterable<Instruction, T, unknown> & Iterator<Instruction, T, unknown> {
  beginExit(frame, outcome);
  // Most scopes end with no child left: settle at once, without a generator to wait in.
  if (!frame.children?.size) return new SettleNow<T, T>(task, frame, outcome, convert, true);
  return exitAfterChildren(task, frame, outcome, convert);
}

/**
 * {@link exitFrame} that returns the scope's outcome instead of throwing it: for a caller that would
 * only catch it again (a retry loop), so a failure costs no second throw.
 */
export function exitFrameOutcome<T>(
  task: TreeTask,
  frame: Frame,
  outcome: Outcome<T>,
  convert?: () => Error,
): Iterable<Instruction, Outcome<T>, unknown> {
  beginExit(frame, outcome);
  if (!frame.children?.size) return new SettleNow<T, Outcome<T>>(task, frame, outcome, convert, false);
  return exitAfterChildrenOutcome(task, frame, outcome, convert);
}

function beginExit<T>(frame: Frame, outcome: Outcome<T>): void {
  frame.bodySettled = true;
  if (!outcome.ok && !isCancelled(outcome.error)) frame.recordError(outcome.error);
}

function* exitAfterChildrenOutcome<T>(
  task: TreeTask,
  frame: Frame,
  outcome: Outcome<T>,
  convert: (() => Error) | undefined,
): Generator<Instruction, Outcome<T>, unknown> {
  while (closeNext(frame)) yield new ChildrenWait(frame);
  return settleOutcome(task, frame, outcome, convert, true);
}

function* exitAfterChildren<T>(
  task: TreeTask,
  frame: Frame,
  outcome: Outcome<T>,
  convert: (() => Error) | undefined,
): Generator<Instruction, T, unknown> {
  const o = yield* exitAfterChildrenOutcome(task, frame, outcome, convert);
  if (!o.ok) throw o.error;
  return o.value;
}

/**
 * `yield*` of a scope exit with no children to wait for: settles on the first step, and gives the
 * value (throwing the error) or, for {@link exitFrameOutcome}, the outcome itself.
 */
class SettleNow<T, R> implements Iterable<Instruction, R, unknown>, Iterator<Instruction, R, unknown> {
  constructor(
    private readonly task: TreeTask,
    private readonly frame: Frame,
    private readonly outcome: Outcome<T>,
    private readonly convert: (() => Error) | undefined,
    private readonly throws: boolean,
  ) {
    shapes.settleNow = this;
  }
  [Symbol.iterator](): this {
    return this;
  }
  next(): IteratorResult<Instruction, R> {
    const o = settleOutcome(this.task, this.frame, this.outcome, this.convert, false);
    if (!this.throws) return { done: true, value: o as R };
    if (!o.ok) throw o.error;
    return { done: true, value: o.value as unknown as R };
  }
}

/**
 * One step of closing `frame`, whose operation has settled (semantics §2): while task children
 * remain, cancels them all at once; once only resources remain, cancels the newest of them, so
 * resources go after every task that may still use them, and a resource goes before the ones it was
 * built on. Returns false when nothing is left to wait for. Idempotent between settlements: a
 * cancelled child is not cancelled again.
 */
export function closeNext(frame: Frame): boolean {
  const children = frame.children;
  if (children === null || children.size === 0) return false;
  const resources = frame.liveResources;
  if (children.size > resources) {
    const reason = exitReason(frame);
    let next = children.first;
    for (let child = next; child; child = next) {
      next = child.nextSibling;
      if (resources === 0 || !child.isResource) child.cancelFromOutside(reason);
    }
  } else {
    // Only resources are left, so the newest child is the newest resource.
    children.last!.cancelFromOutside(exitReason(frame));
  }
  return true;
}

function exitReason(frame: Frame): CancelReason {
  return {
    kind: "parent",
    at: frame.task.clock.now(),
    scope: frame.info,
    message: `${frame.label} finished`,
  };
}

/**
 * A scope's wait for the children {@link closeNext} cancelled: all its task children, or the
 * resource being torn down (a class: see `AllSettledWait` in all.ts).
 */
class ChildrenWait extends SuspensionClass<void> {
  declare readonly interruptible: "never";
  constructor(private readonly frame: Frame) {
    super();
    shapes.childrenWait = this;
  }
  get description(): string {
    const frame = this.frame;
    const live = frame.children?.size ?? 0;
    const tasks = live - frame.liveResources;
    if (tasks > 0 || live === 0) return `${frame.label}: waiting for ${tasks} children to finish`;
    const r = frame.children!.last!;
    return `${frame.label}: closing resource ${r.name}#${r.id}`;
  }
  enterWith(waiter: Waiter<void>): (() => void) | undefined {
    const frame = this.frame;
    if (!frame.children?.size) {
      waiter.resolve(CHILDREN_DONE);
      return undefined;
    }
    frame.waiter = () => waiter.resolve(CHILDREN_DONE);
    return () => {
      frame.waiter = null;
    };
  }
}
structuralWait(ChildrenWait);
suspensionClass(ChildrenWait, "never");

const CHILDREN_DONE: Outcome<void> = Object.freeze({ ok: true, value: undefined });

/**
 * The counting rule at a scope's exit. The scope withdraws its own request (if it made one); when the
 * count is then back to what it was at entry, the cancellation was this scope's and becomes its
 * outcome; otherwise `Cancelled` travels on unchanged and the outermost claim wins. An error beats a
 * cancellation; later errors are attached to the first.
 */
function settleOutcome<T>(
  task: TreeTask,
  frame: Frame,
  outcome: Outcome<T>,
  convert: (() => Error) | undefined,
  waited: boolean,
): Outcome<T> {
  const own = frame.request;
  const owned = own !== null && task.requestCount - 1 === frame.countAtEntry;
  // Only a request of the scope's own timer converts into its error: a group's `child-failed`
  // request (any scope may make one) becomes the child's error, and a timer that never fired
  // leaves no trace.
  if (convert && own !== null && own.reason.kind !== "timeout") convert = undefined;
  const errors = frame.errors;
  task.popFrame(frame);
  if (errors?.length) {
    const primary = errors[0];
    for (const later of errors.slice(1)) task.suppress(primary, later, `${frame.label}: a later error`);
    if (own) {
      if (owned && convert) {
        task.suppress(primary, convert(), `${frame.label}: its timeout was replaced by an error`);
        task.emit({ type: "cancel:replaced", error: primary, reason: own.reason });
      }
      task.withdraw(own);
    }
    return { ok: false, error: primary };
  }
  if (!outcome.ok) {
    if (own && owned) {
      task.withdraw(own);
      return { ok: false, error: convert ? convert() : outcome.error };
    }
    task.adoptEnclosing(frame, outcome.error);
    if (own) {
      task.withdraw(own);
      if (convert) task.emit({ type: "timeout:superseded", scope: frame.info });
    }
    return outcome;
  }
  if (own) {
    const wasDelivered = own.deliveredIn !== null;
    task.withdraw(own);
    if (wasDelivered) task.emit({ type: "cleanup:swallow", scope: frame.info, reason: own.reason });
    if (owned && convert) return { ok: false, error: convert() };
    // An enclosing claim is still in flight: the swallowed cancellation keeps unwinding.
    return {
      ok: false,
      error: task.takeDelivery("normal") ?? task.inFlightCancelled() ?? new Cancelled(own.reason),
    };
  }
  // The wait for children defers delivery like a shield does: a request counted during it is
  // delivered here, so code after this scope never runs once the task is being cancelled.
  if (waited) {
    const pending = task.takeDelivery("normal");
    if (pending) return { ok: false, error: pending };
  }
  return outcome;
}

/**
 * Scope frames: the regions of a task that own children, deadlines and cancellation requests.
 *
 * A task's frames form a stack. The root frame is the task's own; combinators (`timeout`, `scoped`,
 * `all`, `race`, `shield`, retry attempts) push one on entry and pop it on exit. The task's current
 * suspension point is always inside every frame on its stack, so "a request is delivered inside the
 * region of the scope that made it" means "while that frame is on the stack".
 * @module
 */

import type { Cancelled, CancelReason, ScopeInfo } from "./cancelled.js";
import type { ContextValues } from "./context-values.js";
import { shapes } from "./shapes.js";
import type { TreeTask } from "./tree-task.js";

let nextFrameId = 1;
let nextSeq = 1;

/** A global, strictly increasing counter: frame entries and deliveries are ordered by it. */
export function sequence(): number {
  return nextSeq++;
}

/** A cancellation request: counted until the frame that made it exits (never, when from outside). */
export interface CancelRequest {
  /**
   * The frame that made it; null for a request from outside, which belongs to the task's root (the
   * outermost claim) without needing the root frame to exist.
   */
  readonly frame: Frame | null;
  readonly reason: CancelReason;
  /** The unwinding that delivered it, or null while it waits for a suspension point. */
  deliveredIn: Unwinding | null;
  /**
   * When its cleanup budget starts, if not `reason.at` (read it with {@link sinceOf}): a request
   * starts its budget when it is counted (semantics §5: a wait that defers delivery, such as a scope
   * waiting for its children, is charged to the budget), moved later only by the time the task spent
   * waiting at a shield, which the shield's limit bounds instead (§6). Null, not a copy of
   * `reason.at`, because a number stored in a fresh object is a heap allocation of its own.
   */
  since: number | null;
  /** The next request counted against the same task (the task's list, oldest first). */
  next: CancelRequest | null;
}

/**
 * One delivered `Cancelled` and the cleanup it started. Invariant: it lives while any request it
 * delivered is still counted; frames entered after `seq` are fresh for it (their requests are
 * delivered inside them), frames entered before are covered (their new requests wait).
 */
export interface Unwinding {
  readonly seq: number;
  readonly cancelled: Cancelled;
  /**
   * The request whose `since` its budget started from: the earliest of those it delivered (never
   * later than delivery; a delivered request's `since` no longer moves). See {@link unwindingAt}.
   */
  readonly from: CancelRequest;
  readonly budgetMs: number;
  /**
   * The latest the cleanup may end besides its own budget: the earlier of the enclosing unwinding's
   * cleanup deadline (one in progress at delivery) and the region's cleanup cap (`CLEANUP_CAP_KEY`,
   * inside a shield); null when neither applies.
   */
  readonly capAt: number | null;
  /** Invariant: the number of counted requests whose `deliveredIn` is this unwinding. */
  carried: number;
  /** Set when the budget ran out: every suspension point then throws `hardCancelled` at once. */
  hardCancelled: Cancelled | null;
  /**
   * Immediate throws of `hardCancelled` so far: past `HARD_THROW_LIMIT` (a loop that keeps
   * swallowing it) the task is abandoned at once.
   */
  hardThrows: number;
  /** The budget ran out while the task waited for its children: cut when that wait ends. */
  cutDeferred: boolean;
  cancelTimer: (() => void) | null;
  /** The task's next older unwinding in progress (its list is walked from the newest). */
  prev: Unwinding | null;
}

/** True for a request from outside the task (it belongs to the root, recorded without a frame). */
export function isExternal(r: CancelRequest): boolean {
  return r.frame === null;
}

/** When `r`'s cleanup budget starts (see {@link CancelRequest.since}). */
export function sinceOf(r: CancelRequest): number {
  return r.since ?? r.reason.at;
}

/** When `u`'s cleanup budget started. */
export function unwindingAt(u: Unwinding): number {
  return sinceOf(u.from);
}

/** When `u`'s cleanup must be done: its budget from its start, within the enclosing one's. */
export function cleanupDeadlineOf(u: Unwinding): number {
  const end = unwindingAt(u) + u.budgetMs;
  return u.capAt === null ? end : Math.min(end, u.capAt);
}

/** How a frame wants its children's settlements handled (groups override the default). */
export interface ChildPolicy {
  /** Called after a child settles and has been removed from `children`. */
  onChildSettled(child: TreeTask): void;
}

const BODY_SETTLED = 1;
const CLOSED = 2;

/** The fields of a {@link Frame} that most frames never set, kept apart so a frame stays small. */
class FrameRare {
  request: CancelRequest | null = null;
  errors: unknown[] | null = null;
  waiter: (() => void) | null = null;
  policy: ChildPolicy | null = null;
  /** Run once when the frame is popped or its task abandoned: timers, abort signals. */
  cleanups: Set<() => void> | null = null;
  /** Invariant: how many of the frame's live children are resources (`resource: true`). */
  resources = 0;
  constructor() {
    shapes.frameRare = this;
  }
}

export class Frame implements ScopeInfo {
  readonly id = nextFrameId++;
  /**
   * Orders this entry against deliveries: a frame entered after a delivery is fresh for it. A root
   * frame is 0, older than every delivery, even when it is made late (it is made on first use).
   */
  readonly entrySeq: number;
  /** Invariant: `children` holds exactly the tasks spawned here that have not settled. */
  children: ChildList | null = null;
  /** BODY_SETTLED and CLOSED (see their accessors). */
  private flags = 0;
  /** What few frames need (a request, errors, a child policy, cleanups, a waiter); made on first set. */
  private rare: FrameRare | null = null;
  /**
   * The frame's own resource, given back at the latest when it is popped: a timeout scope's timer
   * cancel, a semaphore permit's release. A field, not an exit hook: most frames have one at most.
   */
  own: (() => void) | null = null;

  /** The request this frame made (a timer that fired, a child that failed); at most one. */
  get request(): CancelRequest | null {
    return this.rare === null ? null : this.rare.request;
  }
  set request(r: CancelRequest | null) {
    if (r !== null || this.rare !== null) this.rareOf().request = r;
  }
  /** The body's error and the children's, in the order they happened; `errors[0]` is the primary. */
  get errors(): unknown[] | null {
    return this.rare === null ? null : this.rare.errors;
  }
  /** Resolves the scope-exit wait when the last child settles. */
  get waiter(): (() => void) | null {
    return this.rare === null ? null : this.rare.waiter;
  }
  set waiter(w: (() => void) | null) {
    if (w !== null || this.rare !== null) this.rareOf().waiter = w;
  }
  get policy(): ChildPolicy | null {
    return this.rare === null ? null : this.rare.policy;
  }
  set policy(p: ChildPolicy | null) {
    if (p !== null || this.rare !== null) this.rareOf().policy = p;
  }
  /** True once the frame's operation has settled; the frame may still wait for children. */
  get bodySettled(): boolean {
    return (this.flags & BODY_SETTLED) !== 0;
  }
  set bodySettled(on: boolean) {
    this.flags = on ? this.flags | BODY_SETTLED : this.flags & ~BODY_SETTLED;
  }
  /** True once popped: nothing can be spawned here any more. */
  get closed(): boolean {
    return (this.flags & CLOSED) !== 0;
  }
  set closed(on: boolean) {
    this.flags = on ? this.flags | CLOSED : this.flags & ~CLOSED;
  }

  private rareOf(): FrameRare {
    return (this.rare ??= new FrameRare());
  }

  constructor(
    readonly task: TreeTask,
    readonly parent: Frame | null,
    readonly kind: string,
    /** The scope's name in messages; null for a task's root frame, which takes the task's name. */
    private readonly ownLabel: string | null,
    /** Invariant: the count of the task's requests in flight when the frame was entered. */
    readonly countAtEntry: number,
    /** The effective deadline inside this frame: min of its own and what was in force at entry. */
    readonly deadline: number,
    public contexts: ContextValues,
  ) {
    this.entrySeq = parent === null ? 0 : sequence();
  }

  get label(): string {
    return this.ownLabel ?? this.task.name;
  }

  get depth(): number {
    let d = 0;
    for (let f = this.parent; f; f = f.parent) d++;
    return d;
  }

  /** Is `other` this frame or enclosed by it (in the same task)? */
  encloses(other: Frame): boolean {
    for (let f: Frame | null = other; f; f = f.parent) if (f === this) return true;
    return false;
  }

  addChild(child: TreeTask): void {
    (this.children ??= new ChildList()).add(child);
  }

  /**
   * How many live children are resources: they are torn down last, one by one, when the frame
   * closes (semantics §2). Kept in the rare part, so a frame without one pays nothing.
   */
  get liveResources(): number {
    return this.rare === null ? 0 : this.rare.resources;
  }

  /** Counts a resource child in (`+1`, at its spawn) or out (`-1`, once it has settled). */
  countResource(delta: 1 | -1): void {
    this.rareOf().resources += delta;
  }

  recordError(error: unknown): boolean {
    const rare = this.rareOf();
    (rare.errors ??= []).push(error);
    return rare.errors.length === 1;
  }

  /**
   * Registers `fn` to run when the frame is popped (or its task abandoned); returns its removal, for
   * a resource given back earlier (a released permit, a fully read body), so long-lived scopes do
   * not collect one closure per use.
   */
  onExit(fn: () => void): () => void {
    const rare = this.rareOf();
    const list = (rare.cleanups ??= new Set());
    list.add(fn);
    return () => {
      list.delete(fn);
    };
  }

  /** Gives back the frame's own resource now (a timeout disarms at its body's end), if any. */
  releaseOwn(): void {
    const t = this.own;
    this.own = null;
    t?.();
  }

  runCleanups(): void {
    this.releaseOwn();
    const list = this.rare === null ? null : this.rare.cleanups;
    if (!list) return;
    this.rare!.cleanups = null;
    for (const fn of list) fn();
  }

  get info(): ScopeInfo {
    return { id: this.id, kind: this.kind, label: this.label };
  }
}

/** The sibling links a task carries for its owner's {@link ChildList}. */
export interface Sibling {
  prevSibling: TreeTask | null;
  nextSibling: TreeTask | null;
}

/**
 * A frame's live children as an intrusive doubly linked list: O(1) add and remove with no hashing
 * (a fan-out of 100k children made a `Set` the hottest part of spawn). Iterates in spawn order.
 */
export class ChildList implements Iterable<TreeTask> {
  private head: TreeTask | null = null;
  /** The oldest live child; follow `nextSibling` to walk the list without an iterator. */
  get first(): TreeTask | null {
    return this.head;
  }
  private tail: TreeTask | null = null;
  /** The newest live child; follow `prevSibling` to walk the list backwards. */
  get last(): TreeTask | null {
    return this.tail;
  }
  size = 0;

  add(child: TreeTask): void {
    const c = child as unknown as Sibling;
    c.prevSibling = this.tail;
    c.nextSibling = null;
    if (this.tail) (this.tail as unknown as Sibling).nextSibling = child;
    else this.head = child;
    this.tail = child;
    this.size++;
  }

  delete(child: TreeTask): boolean {
    const c = child as unknown as Sibling;
    // A task is only ever in its owner's list, so linked (or the only one) means in this one.
    if (c.prevSibling === null && this.head !== child) return false;
    if (c.prevSibling) (c.prevSibling as unknown as Sibling).nextSibling = c.nextSibling;
    else this.head = c.nextSibling;
    if (c.nextSibling) (c.nextSibling as unknown as Sibling).prevSibling = c.prevSibling;
    else this.tail = c.prevSibling;
    c.prevSibling = c.nextSibling = null;
    this.size--;
    return true;
  }

  *[Symbol.iterator](): Iterator<TreeTask> {
    for (let t = this.head; t; t = (t as unknown as Sibling).nextSibling) yield t;
  }
}

/**
 * Operations and the instructions they yield to the runtime.
 *
 * An operation is anything with `[Symbol.iterator]()` returning a generator-like iterator; its body
 * is written with `function*` and composes other operations with `yield*`. What an operation yields
 * is not for user code: only Keel's own instructions (a request for the current task, or a
 * suspension) may travel from a generator to the runtime.
 * @module
 */
import { invalidType, invalidUse } from "../errors.js";
import { type NotAPromise, notAPromise, notAPromiseClass, OP_LABEL } from "./not-a-promise.js";
import { shapes } from "./shapes.js";

/**
 * A unit of work that the runtime drives: `yield*` it inside another operation, or `run` it.
 *
 * @example
 * ```ts
 * import { type Operation, run, sleep } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * // Written by hand; a `function*` gives the same thing. Each run starts it afresh.
 * function delayed<T>(ms: number, value: T): Operation<T> {
 *   return { *[Symbol.iterator]() { yield* sleep(ms); return value; } };
 * }
 * const clock = createVirtualClock();
 * const ready = delayed(500, "ready");
 * console.log(await run(ready, { clock }), await run(ready, { clock }), clock.now()); // ready ready 1000
 * ```
 */
export interface Operation<T> {
  [Symbol.iterator](): Iterator<unknown, T, unknown>;
}

/**
 * What every combinator accepts: an operation, or a function (often a `function*`) that makes one.
 *
 * @example
 * ```ts
 * import { now, type Op, run, scoped, sleep } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * // Like every combinator, `timed` takes an operation (`sleep(5)`) or a function making one (`work`).
 * function* timed<T>(op: Op<T>) {
 *   const start = yield* now();
 *   const value = yield* scoped(op);
 *   return { value, ms: (yield* now()) - start };
 * }
 * const clock = createVirtualClock();
 * function* work() { yield* sleep(30); return "done"; }
 * console.log(await run(() => timed(work), { clock })); // { value: "done", ms: 30 }
 * console.log(await run(() => timed(sleep(5)), { clock })); // { value: undefined, ms: 5 }
 * ```
 */
export type Op<T> = Operation<T> | (() => Operation<T>);

/**
 * The value an {@link Op} produces.
 *
 * @example
 * ```ts
 * import { type OpValue, run } from "@keel/core";
 * function* loadUser() { return { id: 7, name: "Ada" }; }
 * type User = OpValue<typeof loadUser>; // { id: number; name: string }
 * const user: User = await run(loadUser);
 * console.log(user.name); // Ada
 * ```
 */
export type OpValue<O> = O extends Op<infer T> ? T : never;

/**
 * A real promise (`then`, `catch`, `finally`, `instanceof Promise`) that is also an operation:
 * awaited from promise code, `yield*`-ed from an operation. What `task.cancel()` returns.
 *
 * @example
 * ```ts
 * import { type Future, run, sleep, suspend } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const clock = createVirtualClock();
 * const worker = run(function* worker() { try { yield* suspend(); } finally { yield* sleep(20); } }, { clock });
 * await run(function* boss() {
 *   yield* sleep(10);
 *   const stopped: Future<void> = worker.cancel("enough");
 *   yield* stopped; // from an operation: yield* it
 *   console.log(`worker stopped at ${clock.now()}`); // worker stopped at 30
 * }, { clock });
 * await worker.cancel(); // from promise code: await it (cancel is idempotent)
 * console.log(worker.cancel() instanceof Promise); // true
 * await worker.cancel().finally(() => console.log("stopped")); // stopped
 * ```
 */
export type Future<T> = Promise<T> & Operation<T>;

/** How an instruction ends: a value or an error. */
export type Outcome<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly error: unknown };

/**
 * How far a suspension protects itself from cancellation.
 * - `"normal"`: cancellation is delivered here.
 * - `"shield"`: ordinary requests wait until it settles; a cleanup-budget cut still interrupts it.
 * - `"never"`: nothing interrupts it (a scope waiting for its children, which are bounded themselves).
 */
export type Interruptible = "normal" | "shield" | "never";

/**
 * A point where a task waits. `enter` starts the wait and returns its teardown, which the runtime
 * calls exactly once when the task leaves the suspension, whether it was resumed or interrupted,
 * with the suspension as `this` (so one shared method can serve every wait of a kind).
 * `resolve` may be called at most once; later calls are ignored.
 */
export interface Suspension<T = unknown> {
  readonly kind: "suspend";
  /** What the task waits on, for the task tree: `sleep(250)`, `GET /orders: headers`. */
  readonly description: string;
  readonly interruptible: Interruptible;
  /**
   * For a `"shield"` wait: the instant the shield's limit is reached. A cancellation requested
   * during the wait starts its cleanup budget when the wait ends, or at this instant if earlier.
   */
  readonly limitAt?: number;
  /**
   * True for the kernel's structural waits (a join, a scope waiting for its children, `all` and
   * `race`): a wait guard lets them pass, since they wait on tasks whose own waits it sees.
   */
  readonly structural?: boolean;
  enter(resolve: (outcome: Outcome<T>) => void): (() => void) | undefined;
  /**
   * The same as `enter`, given the waiter itself rather than a function: the runtime prefers it, so
   * the kernel's own waits (join, sleep, suspend) cost no resolve closure each.
   */
  enterWith?(waiter: Waiter<T>): (() => void) | undefined;
  /**
   * What the wait is, as data, for a task-tree snapshot: called only when a snapshot is taken, so a
   * wait builds nothing for it while nobody looks.
   */
  waitDetail?(): WaitDetail;
}

/**
 * What a task waits on, as data (the snapshot's `waitDetail`): the structured side of a wait's
 * `description`. Times are on the task's clock.
 *
 * @example
 * ```ts
 * import type { WaitDetail } from "@keel/core";
 * const d: WaitDetail = { kind: "semaphore", name: "db", position: 2, waiting: 3 };
 * if (d.kind === "semaphore") console.log(`${d.name}: #${d.position} of ${d.waiting}`); // db: #2 of 3
 * ```
 */
export type WaitDetail =
  | { readonly kind: "sleep"; readonly ms: number; readonly until: number }
  | {
      readonly kind: "semaphore";
      readonly name: string;
      /** 1 for the next to be granted. */
      readonly position: number;
      readonly waiting: number;
    }
  | {
      readonly kind: "http";
      readonly method: string;
      readonly path: string;
      readonly phase: "connect" | "headers" | "body" | "spent";
    }
  | { readonly kind: "join"; readonly taskId: number; readonly name: string };

/**
 * A task as a wait guard hears of it (the public `Task`, which this module cannot import).
 *
 * @example
 * ```ts
 * import { type TaskLike, run, useTask } from "@keel/core";
 * const me = await run(function* named() {
 *   const task: TaskLike = yield* useTask();
 *   return { name: task.name, id: task.id };
 * });
 * console.log(me.name, typeof me.id); // named number
 * ```
 */
export interface TaskLike {
  readonly id: number;
  readonly name: string;
}

/**
 * A wait as a guard sees it: what it waits on, as the task tree names it.
 *
 * @example
 * ```ts
 * import { guardWaits, run, sleep, type WaitInfo } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const waits: WaitInfo[] = [];
 * await run(() => guardWaits({ check: (w) => void waits.push(w) }, sleep(3)), { clock: createVirtualClock() });
 * console.log(waits.map((w) => w.description)); // ["sleep(3)"]
 * ```
 */
export interface WaitInfo {
  readonly description: string;
}

/**
 * What {@link guardWaits} installs.
 *
 * @example
 * ```ts
 * import { guardWaits, run, sleep, type WaitGuard } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const noSleeps: WaitGuard = {
 *   check: (wait) => (wait.description.startsWith("sleep") ? new Error(`refused: ${wait.description}`) : undefined),
 * };
 * await run(function* () {
 *   try { yield* guardWaits(noSleeps, sleep(10)); } catch (e) { console.log((e as Error).message); } // refused: sleep(10)
 * }, { clock: createVirtualClock() });
 * ```
 */
export interface WaitGuard {
  /**
   * Called as a task inside is about to wait: return `undefined` to let it wait, or a value (an
   * error) to throw at its `yield*` instead. A guard that throws refuses with what it threw.
   * The wait is the suspension itself: a guard may recognise its own kinds of wait by class.
   */
  check(wait: WaitInfo): unknown;
  /** Called as each task is spawned inside (the guard's own region included), in spawn order. */
  spawned?(child: TaskLike, parent: TaskLike | null): void;
}

/** The task's side of a wait: `resolve` as a method (at most once; later calls are ignored). */
export interface Waiter<T = unknown> {
  resolve(outcome: Outcome<T>): void;
}

/** The instruction that asks the runtime for the current task, answered synchronously. */
export const CURRENT_TASK: unique symbol = Symbol.for("keel.current-task");

/** The iterator step that asks for the current task, shared (the runtime never mutates it). */
export const ASK_TASK: IteratorYieldResult<typeof CURRENT_TASK> = Object.freeze({
  done: false,
  value: CURRENT_TASK,
});

/** One thing a generator may yield to the runtime. */
export type Instruction = Suspension | typeof CURRENT_TASK;

/** Checks a value accepted as an {@link Op}; throws a `TypeError` naming `parameter` otherwise. */
export function checkOp<T>(parameter: string, op: unknown): Op<T> {
  if (isOp(op)) return op as Op<T>;
  throw invalidType(parameter, "an operation or a function returning one", op);
}

function isOp(op: unknown): boolean {
  return (
    typeof op === "function" ||
    (typeof op === "object" &&
      op !== null &&
      !Array.isArray(op) &&
      typeof (op as Operation<unknown>)[Symbol.iterator] === "function")
  );
}

/**
 * {@link checkOp} for each element of `ops`, naming `${name}(ops[i])` for a bad one. The label is
 * made only for the error: `all` over 10k operations would otherwise build 10k strings.
 */
export function checkOps(name: string, ops: readonly unknown[]): void {
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i];
    if (!isOp(op)) checkOp(`${name}(ops[${i}])`, op);
  }
}

/**
 * Opens an {@link Op}: calls it if it is a function, then checks the result and starts its iterator.
 *
 * A generator object given as the op (`spawn(work())` rather than `spawn(work)`) is its own iterator,
 * so it can run only once: a second run would resume it where the first left it (an exhausted one
 * "completes" with `undefined`). The second run throws instead (see {@link claimGenerator}).
 */
export function iterate<T>(op: Op<T>, parameter = "op"): Iterator<unknown, T, unknown> {
  if (typeof op === "function") {
    const operation = (op as () => Operation<T>)();
    // A `function*`'s generator object is its own iterator: no `[Symbol.iterator]` lookup, which
    // is megamorphic when every spawn makes a closure (each has its own generator map).
    if (isNativeGenerator(operation)) return operation as unknown as Iterator<unknown, T, unknown>;
    if (
      typeof operation !== "object" ||
      operation === null ||
      typeof operation[Symbol.iterator] !== "function"
    ) {
      throw invalidType(parameter, "a function returning an operation", operation);
    }
    return operation[Symbol.iterator]();
  }
  const iterator = op[Symbol.iterator]();
  if ((iterator as unknown) === op) claimRun(op, parameter);
  return iterator;
}

/**
 * Called at the start of each run of an op that was given as an object: a generator object may start
 * once, and its second run throws (see {@link claimGenerator}); any other operation runs as often as
 * asked. For integrations that hand the op to another runtime to iterate (`fromEffection`).
 */
export function claimRun(op: object, parameter: string): void {
  if (isGeneratorObject(op)) claimGenerator(op, parameter);
}

/** The prototype every generator object (of a `function*`) inherits from. */
const GENERATOR_PROTOTYPE: Generator = Object.getPrototypeOf(function* () {}).prototype;

/** `%GeneratorPrototype%.next`: called on a native generator directly, with no property lookup. */
export const generatorNext = GENERATOR_PROTOTYPE.next;
/** `%GeneratorPrototype%.throw`, likewise. */
export const generatorThrow = GENERATOR_PROTOTYPE.throw;

/**
 * True for the generator object of a `function*` (or generator method): its prototype is the
 * function's own `prototype`, whose prototype is `%GeneratorPrototype%`. Two prototype reads, no
 * property lookup: with a closure per spawned child every generator object has its own map, and a
 * lookup of `next` on each would miss V8's inline caches. (A `function*` whose `prototype` object
 * was given its own `next` is not supported: its generators are driven by the standard one.)
 */
export function isNativeGenerator(value: unknown): value is Generator {
  if (typeof value !== "object" || value === null) return false;
  const own = Object.getPrototypeOf(value);
  return own !== null && Object.getPrototypeOf(own) === GENERATOR_PROTOTYPE;
}

function isGeneratorObject(value: object): boolean {
  return Object.prototype.isPrototypeOf.call(GENERATOR_PROTOTYPE, value);
}

/**
 * Checks an op that will run more than once (each retry attempt runs it afresh): a generator object
 * is refused at the call, since it could run only once.
 */
export function checkRerunnableOp<T>(parameter: string, op: unknown): Op<T> {
  checkOp(parameter, op);
  if (typeof op === "object" && isGeneratorObject(op as object)) {
    throw invalidUse(
      parameter,
      "expected an operation that can run more than once, got a generator object (it runs only " +
        "once); pass the generator function itself (retry(fetchOrder)) or a function making a fresh " +
        "one (() => fetchOrder(id))",
    );
  }
  return op as Op<T>;
}

/**
 * The mark of a generator object that a run has started: each may start only once. A property on the
 * object rather than a `WeakSet` entry: every delivery of a worker passes its handler's generator
 * object to `timeout`, and a `WeakSet` entry is an ephemeron that every scavenge must visit (an
 * add measured ~175 ns here; `timeout(ms, generatorObject)` in a tight loop, 0.87 -> 0.66 µs).
 * The symbol is not registered, so only this module can read or write it.
 */
const STARTED: unique symbol = Symbol("keel.started");
/** Started generator objects that refuse a property (frozen, sealed or made non-extensible). */
const startedFrozen = new WeakSet<object>();

/**
 * Marks a generator object as started, or throws when it has been: the op runs more than once (a
 * retry's second attempt, a second `spawn` or `run` of one object) and must be given as a function.
 */
function claimGenerator(generator: object, parameter: string): void {
  const marked = generator as { [STARTED]?: true };
  if (marked[STARTED] !== true) {
    if (Object.isExtensible(generator)) {
      marked[STARTED] = true;
      return;
    }
    if (!startedFrozen.has(generator)) {
      startedFrozen.add(generator);
      return;
    }
  }
  throw invalidUse(
    parameter,
    "this generator object has already run, and a generator object runs only once. Where an " +
      "operation may run more than once (retry, a second spawn or run), pass the generator " +
      "function itself (retry(fetchOrder)) or a function making a fresh one (() => fetchOrder(id))",
  );
}

/** The name a task takes from its operation: the generator function's name, if any. */
export function nameOf(op: Op<unknown>, fallback: string): string {
  const n = typeof op === "function" ? op.name : undefined;
  return n && n.length > 0 ? n : fallback;
}

/**
 * Wraps a suspension as an operation that yields it once and returns its value. A hand-written
 * iterator rather than a generator: this is the innermost frame of every wait, so it is hot.
 */
export function suspension<T>(s: Suspension<T>): Operation<T> & NotAPromise {
  return new SuspensionOperation(s);
}

/**
 * The iterator half of an operation that yields one suspension: a run uses the operation itself as
 * its iterator while no other run does (nearly always: `yield* until(p)` runs once, and an operation
 * made once and run in a loop runs one at a time); a concurrent run gets a {@link YieldOnce} of its
 * own, so the operation stays re-runnable. Invariant: `claimed` is true from a run's start to its
 * end (done, thrown into, or returned); an iterator is not stepped after it is done.
 */
abstract class FirstRunIterator<T> implements Operation<T>, NotAPromise, Iterator<unknown, T, unknown> {
  // biome-ignore lint/suspicious/noThenProperty: a `then` that throws: awaiting an operation is a mistake.
  declare readonly then: NotAPromise["then"];
  private claimed = false;
  private yielded = false;
  /** What the runs wait at. */
  protected abstract get waitsAt(): Suspension<T>;
  [Symbol.iterator](): Iterator<unknown, T, unknown> {
    if (this.claimed) return new YieldOnce<T>(this.waitsAt);
    this.claimed = true;
    return this;
  }
  next(value?: unknown): IteratorResult<unknown, T> {
    if (this.yielded) {
      this.release();
      return { done: true, value: value as T };
    }
    this.yielded = true;
    return { done: false, value: this.waitsAt };
  }
  throw(error?: unknown): IteratorResult<unknown, T> {
    this.release();
    throw error;
  }
  return(value?: unknown): IteratorResult<unknown, T> {
    this.release();
    return { done: true, value: value as T };
  }
  /** The run has ended: the next run may use this object again. */
  private release(): void {
    this.claimed = false;
    this.yielded = false;
  }
}
notAPromiseClass(FirstRunIterator.prototype);
// An awaited `until(p)` or `call(fn)` is named by what it waits on, as the task tree names it.
Object.defineProperty(FirstRunIterator.prototype, OP_LABEL, {
  get(this: FirstRunIterator<unknown>) {
    return (this as unknown as { waitsAt: Suspension<unknown> }).waitsAt.description;
  },
});

/**
 * Puts a suspension class's `kind` and `interruptible` on its prototype: they are the same for every
 * instance, and an instance field each costs 16 bytes on every wait (a queue of 10k waiters).
 * The class declares them (`declare readonly kind: "suspend"`) so that they are not own fields.
 */
export function suspensionClass(cls: { prototype: object }, interruptible: Interruptible | null): void {
  Object.defineProperty(cls.prototype, "kind", { value: "suspend" });
  if (interruptible) Object.defineProperty(cls.prototype, "interruptible", { value: interruptible });
}

/** Marks a suspension class as structural (see `Suspension.structural`), on its prototype. */
export function structuralWait(cls: { prototype: object }): void {
  Object.defineProperty(cls.prototype, "structural", { value: true });
}

/**
 * A suspension written as a class: `enter` in terms of `enterWith`, and `kind` on the prototype.
 * A subclass declares `interruptible` and puts it on its prototype with {@link suspensionClass}.
 */
export abstract class SuspensionClass<T> implements Suspension<T> {
  declare readonly kind: "suspend";
  abstract readonly description: string;
  abstract readonly interruptible: Interruptible;
  abstract enterWith(waiter: Waiter<T>): (() => void) | undefined;
  enter(resolve: (outcome: Outcome<T>) => void): (() => void) | undefined {
    return this.enterWith({ resolve });
  }
}
suspensionClass(SuspensionClass, null);

/**
 * A suspension that is also its own operation and, on its first run, its own iterator: one object
 * per wait for the kernel's promise and callback waits (`until`, `action`).
 */
export abstract class SelfSuspension<T> extends FirstRunIterator<T> implements Suspension<T> {
  declare readonly kind: "suspend";
  abstract readonly description: string;
  abstract readonly interruptible: Interruptible;
  abstract enterWith(waiter: Waiter<T>): (() => void) | undefined;
  enter(resolve: (outcome: Outcome<T>) => void): (() => void) | undefined {
    return this.enterWith({ resolve });
  }
  protected get waitsAt(): Suspension<T> {
    return this;
  }
}
suspensionClass(SelfSuspension, null);

/**
 * An operation for a suspension that never resumes with a value (only a cancellation ends it):
 * shared and stateless, since its iterator only ever sees one `next`, then a `throw` or `return`.
 */
export function neverResuming(s: Suspension<never>): Operation<never> & NotAPromise {
  const step: IteratorYieldResult<Suspension<never>> = Object.freeze({ done: false, value: s });
  const iterator: Iterator<unknown, never, unknown> = {
    next: () => step,
    throw(error?: unknown): never {
      throw error;
    },
    return: (value?: unknown) => ({ done: true, value: value as never }),
  };
  return notAPromise({ [Symbol.iterator]: () => iterator }, s.description);
}

/** An operation yielding a given suspension (see {@link FirstRunIterator}). */
class SuspensionOperation<T> extends FirstRunIterator<T> {
  constructor(private readonly s: Suspension<T>) {
    super();
  }
  protected get waitsAt(): Suspension<T> {
    return this.s;
  }
}

class YieldOnce<T> implements Iterator<unknown, T, unknown> {
  private done = false;
  constructor(private readonly s: Suspension<T>) {
    shapes.yieldOnce = this;
  }
  next(value?: unknown): IteratorResult<unknown, T> {
    if (this.done) return { done: true, value: value as T };
    this.done = true;
    return { done: false, value: this.s };
  }
  throw(error?: unknown): IteratorResult<unknown, T> {
    this.done = true;
    throw error;
  }
  return(value?: unknown): IteratorResult<unknown, T> {
    this.done = true;
    return { done: true, value: value as T };
  }
}

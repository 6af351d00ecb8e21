/**
 * `spawn`, `scoped` and `useScope`: children, and the scopes that own them.
 * @module
 */
import { checkOptions, invalidType } from "../errors.js";
import { captureAsyncContext } from "./async-context.js";
import { BoundOp1, nameBody } from "./bound-op.js";
import { currentTask, delegate, taskOf } from "./current.js";
import { exitFrame } from "./frame-exit.js";
import { checkLogFields, childWithFields, type SpawnOptions, SpawnWithFields } from "./log-fields.js";
import { type NotAPromise, notAPromise, notAPromiseClass, OP_LABEL } from "./not-a-promise.js";
import { ASK_TASK, checkOp, nameOf, type Op, type Operation, type Outcome } from "./operation.js";
import { shapes } from "./shapes.js";
import { spawnInto } from "./spawn-into.js";
import { runningTask, type Task, type TaskImpl } from "./task.js";

export { type SpawnIntoOptions, spawnInto } from "./spawn-into.js";

/**
 * Starts `op` as a child of the current scope and returns its task at once; the child's body starts
 * on the next scheduler turn.
 *
 * The child is owned by the innermost scope around the `spawn`: when that scope's operation settles,
 * the child is cancelled (reason `"parent"`) and the scope waits for it. A child's error fails its
 * owner: the scope is cancelled with reason `"child-failed"` and rethrows that error.
 *
 * **Cancellation**: cancelling the owner's region cancels the child at once.
 * **Time**: the child inherits the deadline in force where it was spawned.
 *
 * @example
 * ```ts
 * import { run, sleep, spawn } from "@keel/core";
 * const total = await run(function* main() {
 *   const a = yield* spawn(function* fetchA() { yield* sleep(10); return 1; });
 *   const b = yield* spawn(function* fetchB() { yield* sleep(20); return 2; });
 *   return (yield* a) + (yield* b);
 * });
 * console.log(total); // 3
 * ```
 * @throws `TypeError` when `op` is not an operation; `KEEL_SCOPE_CLOSED` when no scope can own it.
 */
export function spawn<T>(op: Op<T>, options?: SpawnOptions): Operation<Task<T>> & NotAPromise {
  checkOp("spawn(op)", op);
  const name = checkOptions("spawn(op, options)", options)?.name;
  if (name !== undefined && typeof name !== "string")
    throw invalidType("spawn(op, { name })", "a string", name);
  const fields = checkLogFields("spawn(op, { logFields })", options?.logFields);
  return (fields ? new SpawnWithFields(op, name, fields) : new SpawnOperation(op, name)) as Operation<
    Task<T>
  > &
    NotAPromise;
}

/**
 * Inside a task's step the operation is its own iterator, and its own iterator result: its one
 * `next` spawns at once and returns itself with the child as `value` (`yield*` reads it at once), so
 * a spawn makes one object (and `yield*` it twice spawns twice). Driven from elsewhere it asks for
 * the task first.
 */
class SpawnOperation<T>
  implements
    Operation<Task<T>>,
    NotAPromise,
    Iterator<unknown, Task<T>, unknown>,
    IteratorReturnResult<Task<T>>
{
  // biome-ignore lint/suspicious/noThenProperty: a `then` that throws: awaiting an operation is a mistake.
  declare readonly then: NotAPromise["then"];
  readonly done = true;
  /** The child of the latest spawn (a settled task stays small), read by `yield*` as the result. */
  value: Task<T> = null as unknown as Task<T>;
  constructor(
    private readonly op: Op<T>,
    private readonly name: string | undefined,
  ) {
    shapes.spawn = this;
  }
  [Symbol.iterator](): Iterator<unknown, Task<T>, unknown> {
    return runningTask() ? this : new SpawnIterator(this.op, this.name);
  }
  next(): IteratorResult<unknown, Task<T>> {
    const task = taskOf(runningTask(), "spawn(op)");
    task.checkpoint();
    this.value = spawnInto(task.top, this.op, this.name ?? nameOf(this.op, "task"));
    return this;
  }
}

function spawnHere<T>(
  task: TaskImpl<unknown>,
  op: Op<T>,
  name: string | undefined,
): IteratorResult<unknown, Task<T>> {
  task.checkpoint();
  return { done: true, value: spawnInto(task.top, op, name ?? nameOf(op, "task")) };
}

notAPromiseClass(SpawnOperation.prototype);
Object.defineProperty(SpawnOperation.prototype, OP_LABEL, { value: "spawn(…)" });
notAPromiseClass(SpawnWithFields.prototype);
Object.defineProperty(SpawnWithFields.prototype, OP_LABEL, { value: "spawn(…)" });

/** `yield* spawn(op)` driven from outside a task's step: asks for the task, then starts the child. */
class SpawnIterator<T> implements Iterator<unknown, Task<T>, unknown> {
  private asked = false;
  constructor(
    private readonly op: Op<T>,
    private readonly name: string | undefined,
  ) {}
  next(answer?: unknown): IteratorResult<unknown, Task<T>> {
    if (!this.asked) {
      this.asked = true;
      return ASK_TASK;
    }
    return spawnHere(taskOf(answer, "spawn(op)"), this.op, this.name);
  }
  throw(error?: unknown): IteratorResult<unknown, Task<T>> {
    throw error;
  }
  return(value?: unknown): IteratorResult<unknown, Task<T>> {
    return { done: true, value: value as Task<T> };
  }
}

/**
 * Runs `op` in a new scope: children it spawns are cancelled and awaited before `scoped` returns, and
 * the first child error fails the scope (semantics §2, §7).
 *
 * @example
 * ```ts
 * import { run, scoped, sleep, spawn } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * let beats = 0;
 * const result = await run(() => scoped(function* batch() {
 *   yield* spawn(function* heartbeat() { for (;;) { yield* sleep(1000); beats++; } });
 *   yield* sleep(2500);
 *   return "done"; // heartbeat is cancelled and awaited here
 * }), { clock: createVirtualClock() });
 * console.log(result, beats); // "done" 2
 * ```
 */
export function scoped<T>(op: Op<T>): Operation<T> & NotAPromise {
  checkOp("scoped(op)", op);
  return new BoundOp1(inScope, op) as Operation<T> & NotAPromise;
}

function* inScope<T>(op: Op<T>): Generator<unknown, T, unknown> {
  const task = yield* currentTask("scoped(op)");
  task.checkpoint();
  const frame = task.pushFrame("scoped", `scoped(${nameOf(op, "op")})`);
  let outcome: Outcome<T>;
  try {
    outcome = { ok: true, value: yield* delegate(op) };
  } catch (error) {
    outcome = { ok: false, error };
  }
  return yield* exitFrame(task, frame, outcome);
}

/**
 * A handle on a scope, for starting children in it from elsewhere (callbacks, other tasks).
 *
 * @example
 * ```ts
 * import { run, type Scope, sleep, useScope } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * import { EventEmitter } from "node:events";
 * const bus = new EventEmitter();
 * const clock = createVirtualClock();
 * const handled: string[] = [];
 * let serverScope: Scope | undefined;
 * await run(function* server() {
 *   const scope = yield* useScope();
 *   serverScope = scope;
 *   // A plain callback starts tasks that the server's scope owns.
 *   bus.on("job", (name: string) =>
 *     scope.spawn(function* handle() {
 *       yield* sleep(10);
 *       handled.push(`${name}@${clock.now()}`);
 *     }),
 *   );
 *   bus.emit("job", "a");
 *   yield* sleep(5);
 *   bus.emit("job", "b");
 *   yield* sleep(50);
 * }, { clock });
 * bus.removeAllListeners();
 * console.log(handled, serverScope?.closed); // ["a@10", "b@15"] true
 * ```
 */
export interface Scope {
  /**
   * Starts `op` as a child of this scope; throws `KEEL_SCOPE_CLOSED` once the scope has finished.
   * The child's steps run in the async context (`AsyncLocalStorage`) in force at this call.
   */
  spawn<T>(op: Op<T>, options?: SpawnOptions): Task<T>;
  /** True once the scope has finished and accepts no more children. */
  readonly closed: boolean;
}

/**
 * Returns a handle on the current scope.
 *
 * @example
 * ```ts
 * import { run, sleep, useScope } from "@keel/core";
 * await run(function* server() {
 *   const scope = yield* useScope();
 *   setTimeout(() => scope.spawn(function* onRequest() { yield* sleep(1); }), 0);
 *   yield* sleep(10);
 * });
 * ```
 */
export function useScope(): Operation<Scope> & NotAPromise {
  return USE_SCOPE;
}

/** Shared: it holds no state, and a literal with a generator method per call costs ~400 ns. */
const USE_SCOPE: Operation<Scope> & NotAPromise = notAPromise(
  {
    *[Symbol.iterator]() {
      const task = yield* currentTask("useScope()");
      const frame = task.top;
      return {
        spawn<T>(op: Op<T>, options?: SpawnOptions) {
          checkOp("scope.spawn(op)", op);
          const fields = checkLogFields("scope.spawn(op, { logFields })", options?.logFields);
          // Called from anywhere (a request handler's callback): the child runs in the caller's context.
          return spawnInto(
            frame,
            op,
            options?.name ?? nameOf(op, "task"),
            fields ? childWithFields(frame.contexts, fields) : { asyncContext: captureAsyncContext() },
          );
        },
        get closed() {
          return frame.closed || frame.bodySettled;
        },
      };
    },
  },
  "useScope()",
);

// What an awaited one of these operations is called in its KEEL_OPERATION_AWAITED error.
nameBody(inScope, "scoped");

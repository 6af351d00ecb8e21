/**
 * `fromEffection`: an effection operation run from Keel code.
 * @module
 */

import { createScope, type Future as EffectionFuture, type Operation as EffectionOperation } from "effection";
import { invalidType } from "../errors.js";
import { currentTask } from "../kernel/current.js";
import { exitFrame } from "../kernel/frame-exit.js";
import { notAPromise } from "../kernel/not-a-promise.js";
import { claimRun, type Operation, type Outcome, type Suspension } from "../kernel/operation.js";
import { spawnInto } from "../kernel/spawn.js";
import { outsideTask } from "../kernel/task.js";
import { holdClock } from "./clock-hold.js";
import { KeelEnvContext } from "./env.js";

/**
 * Runs an effection operation from Keel code and gives its value, or throws its error unchanged.
 *
 * The operation runs in an effection scope of its own, owned by a Keel child task named
 * `effection:<name>`, which is the node the task tree shows (waiting on `effection <name>`).
 *
 * **Cancellation**: when the calling task is cancelled, or a Keel `timeout` around this fires, the
 * effection task is halted (effection's `iterator.return()`: its `finally` blocks run, its children
 * and resources are torn down) and Keel waits for that teardown inside a `finally` of its own, so the
 * Keel cleanup budget bounds it. A teardown that overruns the budget is cut like any other Keel
 * cleanup (a `cleanup:overrun` event naming `effection <name>: halting`); effection finishes it in the
 * background. A task cancelled before the operation started never starts it.
 *
 * **Time**: effection's timers are real. On a virtual clock, the clock is held while the effection
 * work is in flight (key `"effection"`; `clock.idle("effection")` lets autojump move past it), except
 * while Keel code nested inside it (`toEffection`) runs on that same clock. Nested Keel code
 * inherits this clock, the deadline in force here and the cleanup budget.
 *
 * @example
 * ```ts
 * import { run, timeout } from "@keel/core";
 * import { fromEffection } from "@keel/core/effection";
 * import { sleep } from "effection";
 * function* answer() { yield* sleep(5); return 42; }
 * const v = await run(() => timeout(1000, fromEffection(answer)));
 * console.log(v); // 42
 * ```
 * Pass the generator function (`fromEffection(answer)`), or a function making the operation
 * (`() => query(sql)`): each run then starts a fresh one. A generator object (`answer()`) can run
 * only once; running the returned operation again (a retry, say) throws a `TypeError`.
 *
 * @throws `TypeError` when `op` is not an effection operation or a function returning one.
 */
export function fromEffection<T>(
  op: EffectionOperation<T> | (() => EffectionOperation<T>),
  options: { name?: string } = {},
): Operation<T> {
  if (
    typeof op !== "function" &&
    typeof (op as EffectionOperation<T> | null)?.[Symbol.iterator] !== "function"
  )
    throw invalidType("fromEffection(op)", "an effection operation or a function returning one", op);
  if (typeof options !== "object" || options === null)
    throw invalidType("fromEffection(op, options)", "an object", options);
  const name = options.name ?? (typeof op === "function" && op.name ? op.name : "operation");
  if (typeof name !== "string") throw invalidType("fromEffection(op, { name })", "a string", name);
  const label = `effection:${name}`;
  return notAPromise(
    {
      *[Symbol.iterator]() {
        const task = yield* currentTask(`fromEffection(${name})`);
        task.checkpoint();
        const operation = openEffection(op);
        const frame = task.pushFrame("effection", label);
        let wake: (() => void) | null = null;
        // The child's outcome is this scope's outcome: its error is thrown unchanged at exit, never
        // turned into a `child-failed` cancellation of the caller.
        frame.policy = {
          onChildSettled(child) {
            const f = child.outcome;
            if (f?.state === "failed") frame.recordError(f.error);
            wake?.();
          },
        };
        let outcome: Outcome<T>;
        try {
          const child = spawnInto(frame, () => driveEffection(operation, name), label);
          yield {
            kind: "suspend",
            description: `join ${label}#${child.id}`,
            interruptible: "normal",
            enter(resolve: (o: Outcome<void>) => void) {
              if (child.isSettled) {
                resolve({ ok: true, value: undefined });
                return undefined;
              }
              wake = () => resolve({ ok: true, value: undefined });
              return () => {
                wake = null;
              };
            },
          } satisfies Suspension<void>;
          const f = child.outcome!;
          if (f.state === "completed") outcome = { ok: true, value: f.value as T };
          // A failed child's error is already the frame's primary error, which exitFrame throws.
          else if (f.state === "failed") outcome = { ok: true, value: undefined as T };
          // Cancelled while this task was not (a request not delivered again during cleanup).
          else outcome = child.joinOutcome() as Outcome<T>;
        } catch (error) {
          outcome = { ok: false, error };
        }
        return yield* exitFrame(task, frame, outcome);
      },
    },
    `fromEffection(${name})`,
  );
}

/**
 * The effection operation for one run: a function is called afresh each time; a generator object
 * given as is may run only once (a retry or a second run would resume it exhausted).
 */
function openEffection<T>(op: EffectionOperation<T> | (() => EffectionOperation<T>)): EffectionOperation<T> {
  if (typeof op !== "function") {
    claimRun(op, "fromEffection(op)");
    return op;
  }
  const operation = op();
  if (typeof (operation as EffectionOperation<T> | null)?.[Symbol.iterator] !== "function")
    throw invalidType("fromEffection(op)", "a function returning an effection operation", operation);
  return operation;
}

/**
 * The body of the `effection:<name>` task: starts the effection task in a fresh scope, waits for it,
 * and on the way out (however it leaves) destroys that scope and waits for the teardown.
 */
function* driveEffection<T>(op: EffectionOperation<T>, name: string): Generator<unknown, T, unknown> {
  const self = yield* currentTask(`fromEffection(${name})`);
  const hold = holdClock(self.clock, `effection ${name}`);
  // A scope under effection's global one: the error of a task in it is Keel's to handle, never
  // raised into an enclosing effection task.
  const scope = createScope();
  const [, destroy] = scope;
  scope.set(KeelEnvContext, {
    task: self,
    contexts: self.top.contexts,
    deadline: self.effectiveDeadline(),
    pauseHold: () => hold.pause(),
  });
  try {
    return (yield settleOf(
      outsideTask(() => scope.run(() => op)),
      `effection ${name}`,
    )) as T;
  } finally {
    // Halting is effection's `return()`; Keel waits for it here, under the cleanup budget, which
    // cuts this wait (not effection's teardown, which then finishes in the background).
    try {
      yield settleOf(outsideTask(destroy), `effection ${name}: halting`);
    } finally {
      hold.release();
    }
  }
}

/**
 * A suspension that waits for an effection future. Its handlers are attached on entry and stay
 * attached, so a rejection after Keel stopped waiting (a cut teardown) is never unhandled.
 */
function settleOf<T>(future: EffectionFuture<T>, description: string): Suspension<T> {
  return {
    kind: "suspend",
    description,
    interruptible: "normal",
    enter(resolve) {
      let live = true;
      future.then(
        (value) => live && resolve({ ok: true, value }),
        (error: unknown) => live && resolve({ ok: false, error }),
      );
      return () => {
        live = false;
      };
    },
  };
}

/**
 * `spawnInto`: how every child task is made (by `spawn`, `scope.spawn`, the combinators, a shield,
 * a resource), apart from `spawn.ts` so that a spawn with log fields (`log-fields.ts`) can use it
 * while `spawn.ts` uses that.
 * @module
 */
import { KeelError } from "../errors.js";
import type { AsyncContext } from "./async-context.js";
import type { ContextValues } from "./context-values.js";
import type { Frame } from "./frame.js";
import type { Op } from "./operation.js";
import { withAsyncContext } from "./runtime.js";
import { TaskImpl, type TaskInit } from "./task.js";

/** What `spawnInto` may be told; most spawns pass nothing. */
export interface SpawnIntoOptions {
  shielded?: boolean;
  resource?: boolean;
  deadline?: number;
  asyncContext?: AsyncContext;
  /** The child's contexts, when not the frame's (a shield's work starts inside its limit and cap). */
  contexts?: ContextValues;
}

const NO_OPTIONS: SpawnIntoOptions = Object.freeze({});

/**
 * One init record for every child: the task's constructor reads it and keeps nothing of it, and
 * spawns never nest inside that read, so filling this one costs no allocation per child (a record
 * per spawn was ~90 bytes of garbage each, on the spawn+join bench row).
 */
const childInit: { -readonly [K in keyof TaskInit]-?: TaskInit[K] } = {
  name: "",
  parent: null,
  owner: null,
  runtime: null as unknown as TaskInit["runtime"],
  contexts: null as unknown as TaskInit["contexts"],
  deadline: Infinity,
  shielded: false,
  resource: false,
  longLived: false,
};

/**
 * Starts `op` as a child task owned by `frame`; throws `KEEL_SCOPE_CLOSED` if the frame has ended.
 * The child's steps run in `options.asyncContext`, by default in its parent's (a spawn from a step
 * of the parent runs in the parent's context).
 */
export function spawnInto<T>(
  frame: Frame,
  op: Op<T>,
  name: string,
  options: SpawnIntoOptions = NO_OPTIONS,
): TaskImpl<T> {
  const parent = frame.task;
  if (frame.closed || frame.bodySettled || parent.isSettled) {
    throw new KeelError(
      "KEEL_SCOPE_CLOSED",
      `spawn(${name}): the scope ${frame.label} of ${parent.path} has finished`,
    );
  }
  const deadline = options.deadline ?? (parent.top === frame ? parent.effectiveDeadline() : frame.deadline);
  const ctx = options.asyncContext;
  const init = childInit;
  init.name = name;
  init.parent = parent;
  init.owner = frame;
  init.runtime =
    ctx === undefined || ctx === parent.runtime.asyncContext
      ? parent.runtime
      : withAsyncContext(parent.runtime, ctx);
  init.contexts = options.contexts ?? frame.contexts;
  init.deadline = deadline;
  init.shielded = options.shielded ?? false;
  init.resource = options.resource ?? false;
  let child: TaskImpl<T>;
  try {
    child = new TaskImpl(op, init);
  } finally {
    // Nothing of a parent's tree stays reachable from the shared record.
    init.parent = null;
    init.owner = null;
    init.runtime = null as unknown as TaskInit["runtime"];
    init.contexts = null as unknown as TaskInit["contexts"];
  }
  frame.addChild(child);
  if (options.resource) frame.countResource(1);
  return child.start();
}

/**
 * `@keel/core`: structured concurrency for TypeScript.
 *
 * An explicit barrel: everything public is named here; nothing under `internal` paths is exported.
 * @module
 */

export type { KeelErrorCode } from "./errors.js";
export {
  errorCodes,
  isKeelError,
  isTaskCancelledError,
  isTimeoutError,
  KeelError,
  TaskCancelledError,
  TimeoutError,
} from "./errors.js";
export type { AllValues } from "./kernel/all.js";
export { all } from "./kernel/all.js";
export type { CancelReason, ScopeInfo } from "./kernel/cancelled.js";
export { Cancelled, isCancelled } from "./kernel/cancelled.js";
export type { Clock } from "./kernel/clock.js";
export type { Context } from "./kernel/context.js";
export { createContext } from "./kernel/context.js";
export { action, call, until, useAbortSignal } from "./kernel/interop.js";
export type { Future, Op, Operation, OpValue } from "./kernel/operation.js";
export { race } from "./kernel/race.js";
export type { Scope } from "./kernel/spawn.js";
export { scoped, spawn, useScope } from "./kernel/spawn.js";
export { suspend } from "./kernel/suspend.js";
export type { Task, TaskState } from "./kernel/task.js";
export type { KeelEvent, KeelEventType } from "./observe/events.js";
export type { TaskSnapshot } from "./observe/snapshot.js";
export { formatTaskTree, snapshot } from "./observe/snapshot.js";
export type { RunOptions } from "./run.js";
export { run } from "./run.js";
export { withCleanupBudget } from "./time/cleanup-budget.js";
export { deadline, now, remaining } from "./time/deadline.js";
export { createRealClock, realClock } from "./time/real-clock.js";
export { shield } from "./time/shield.js";
export { sleep } from "./time/sleep.js";
export { timeout, timeoutAt } from "./time/timeout.js";

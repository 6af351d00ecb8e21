/**
 * `@keel/core`: structured concurrency for TypeScript.
 *
 * An explicit barrel: everything public is named here; nothing under `internal` paths is exported.
 * @module @keel/core
 */

export { argumentChecks } from "./argument-checks.js";
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
export { describeThrown } from "./format-value.js";
export type { AllValues } from "./kernel/all.js";
export { all } from "./kernel/all.js";
// Lazy fan-out, settled groups, deadline predicate, channel feeding (issue 10 items 4 and 6).
export type { AllSettledResults } from "./kernel/all-settled.js";
export { allSettled } from "./kernel/all-settled.js";
export type { CancelReason, ScopeInfo } from "./kernel/cancelled.js";
export { Cancelled, isCancelled } from "./kernel/cancelled.js";
export type { Clock } from "./kernel/clock.js";
export type { Context } from "./kernel/context.js";
export { createContext } from "./kernel/context.js";
export { useTask } from "./kernel/current.js";
export { action, call, until, useAbortSignal } from "./kernel/interop.js";
// Log fields: a delivery's queue, job id and attempt on every record about it (issue 24 item 5).
export { type LogFields, logFields, type SpawnOptions } from "./kernel/log-fields.js";
// Observability (logs, diagnosis): issue 13.
export type { NotAPromise } from "./kernel/not-a-promise.js";
// Replaying runtimes built on Keel (@keel/workflow): wait guards and eviction (issue 25).
export type {
  Future,
  Op,
  Operation,
  OpValue,
  TaskLike,
  WaitDetail,
  WaitGuard,
  WaitInfo,
} from "./kernel/operation.js";
export { race } from "./kernel/race.js";
export type { RandomSource } from "./kernel/random.js";
export { random, withRandom } from "./kernel/random.js";
export { resource } from "./kernel/resource.js";
export type { Scope } from "./kernel/spawn.js";
export { scoped, spawn, useScope } from "./kernel/spawn.js";
export { suspend } from "./kernel/suspend.js";
export type { Task, TaskState } from "./kernel/task.js";
export { evict, guardWaits, spawnEvictable, whenDrained } from "./kernel/wait-guard.js";
// Emitting into the event stream from packages built on Keel (@keel/worker).
export { emitEvent, eventsWanted, type PackageEventInput } from "./observe/emit.js";
export type { KeelEvent, KeelEventType } from "./observe/events.js";
export { KEEL_CHANNELS } from "./observe/events.js";
export { formatTaskTree } from "./observe/format-tree.js";
export {
  type KeelLogger,
  type LogEvents,
  type LogLevel,
  type LogRecord,
  type PinoLike,
  pinoLogger,
} from "./observe/logger.js";
export type { TaskSnapshot } from "./observe/snapshot.js";
export { snapshot } from "./observe/snapshot.js";
export { addInspectSection, type InspectSectionContent } from "./process/inspect-sections.js";
export { type MainOptions, main } from "./process/main.js";
export type { Backoff, BackoffState, Jitter } from "./resilience/backoff.js";
export { constant, exponential, fromDelays } from "./resilience/backoff.js";
export type { Channel } from "./resilience/channel.js";
export { ChannelClosedError, createChannel } from "./resilience/channel.js";
export type { CircuitBreaker, CircuitState } from "./resilience/circuit-breaker.js";
export {
  BrokenCircuitError,
  createCircuitBreaker,
  isBrokenCircuitError,
} from "./resilience/circuit-breaker.js";
export { isDeadlineExceeded } from "./resilience/deadline-exceeded.js";
export { forEachLimit, mapLimit, mapLimitSettled } from "./resilience/fan-out.js";
export { type FeedOptions, feed } from "./resilience/feed.js";
export type { ItemsOf } from "./resilience/item-source.js";
export type { RateLimiter } from "./resilience/rate-limiter.js";
export { createRateLimiter } from "./resilience/rate-limiter.js";
export type { AttemptInfo, RetryInfo, RetryPolicy } from "./resilience/retry.js";
export { retry } from "./resilience/retry.js";
export type { AttemptRecord, GiveUpReason } from "./resilience/retry-exhausted-error.js";
export { isRetryExhaustedError, RetryExhaustedError } from "./resilience/retry-exhausted-error.js";
export type { Permit, Semaphore } from "./resilience/semaphore.js";
export { createSemaphore } from "./resilience/semaphore.js";
export { isTransient, retryableStatuses } from "./resilience/transient.js";
export type { RunOptions } from "./run.js";
export { run } from "./run.js";
export { cleanupBudget, withCleanupBudget } from "./time/cleanup-budget.js";
export { deadline, now, remaining, useClock } from "./time/deadline.js";
export { createRealClock, realClock } from "./time/real-clock.js";
export { shield } from "./time/shield.js";
export { sleep } from "./time/sleep.js";
export type { TimeoutOptions } from "./time/timeout.js";
export { timeout, timeoutAt } from "./time/timeout.js";

/**
 * `@keel/worker`: job queues with per-job deadlines, retries and dead letters, and a bounded
 * graceful shutdown.
 *
 * An explicit barrel: everything public is named here.
 * @module @keel/worker
 */

export type {
  AddResult,
  DeadLetter,
  DeadLetterReason,
  EngineAddOptions,
  EngineCounts,
  EngineJob,
  JobAttempt,
  JobState,
  QueueEngine,
} from "./engine.js";
export {
  EngineTimeoutError,
  EngineUnavailableError,
  isEngineTimeoutError,
  isEngineUnavailableError,
  isJobAbandonedError,
  isJobLockLostError,
  JobAbandonedError,
  JobLockLostError,
} from "./engine-errors.js";
export type { EngineHealthReading } from "./engine-health.js";
export {
  isJobExpiredError,
  isJobStalledOutError,
  isJobThrewError,
  isQueueClosedError,
  JobCancelledError,
  JobExpiredError,
  JobStalledError,
  JobStalledOutError,
  JobThrewError,
  QueueClosedError,
} from "./errors.js";
export type { MemoryQueue } from "./memory-queue.js";
export { createMemoryQueue } from "./memory-queue.js";
export type { JobAttemptInfo, WorkerOptions, WorkerRetry } from "./options.js";
export type { AddOptions, Queue } from "./queue.js";
export type { ShutdownReport, WorkerStats } from "./stats.js";
export type { Job, Worker } from "./worker.js";
export { useWorker } from "./worker.js";

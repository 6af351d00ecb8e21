/**
 * `@keel/worker`: job queues with per-job deadlines, retries and dead letters, and a bounded
 * graceful shutdown.
 *
 * An explicit barrel: everything public is named here.
 * @module
 */

export type {
  AddResult,
  DeadLetter,
  DeadLetterReason,
  EngineAddOptions,
  EngineCounts,
  EngineJob,
  JobAttempt,
  QueueEngine,
} from "./engine.js";

/**
 * `@keel/workflow`: durable workflows on Keel. Steps are journaled, so a crash resumes where it
 * stopped; sleeps and events outlast a deploy; deadlines and cancellation hold across restarts.
 * @module @keel/workflow
 */
export { type Workflow, workflow } from "./definition.js";
export {
  type ExecutionInfo,
  executionInfo,
  now,
  patched,
  random,
  sleepFor,
  sleepUntil,
  waitForEvent,
} from "./durable-ops.js";
export {
  type Started,
  type StartOptions,
  startWorkflowEngine,
  type WorkflowEngine,
  type WorkflowEngineOptions,
} from "./engine.js";
export {
  ExecutionDeadlineError,
  ExecutionNotFoundError,
  isExecutionDeadlineError,
  isNonDeterminismError,
  isNonDurableWaitError,
  isNotJournalableError,
  isWorkflowFailedError,
  NonDeterminismError,
  NonDurableWaitError,
  NotInWorkflowError,
  NotJournalableError,
  StoreTimeoutError,
  UnknownWorkflowError,
  WorkflowFailedError,
} from "./errors.js";
export { type StepInfo, type StepOptions, step, stepInfo } from "./step.js";
export { createMemoryStore } from "./store/memory-store.js";
// The stores at subpaths (`/postgres`, `/sqlite`) throw it when their peer package is missing.
export { isMissingPackageError, MissingPackageError } from "./store/missing-package.js";
export type {
  Claimed,
  ExecutionRecord,
  ExecutionStatus,
  Finish,
  JournalEntry,
  JournaledError,
  JsonValue,
  Lease,
  ListFilter,
  NewExecution,
  Park,
  SignalRecord,
  WorkflowStore,
} from "./store/store.js";
export { DuplicateEntryError, isLeaseLostError, LeaseLostError } from "./store/store-errors.js";
export type { ExecutionView, StepView } from "./view.js";

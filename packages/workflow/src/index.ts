/**
 * `@keel/workflow`: durable workflows on Keel. Steps are journaled, so a crash resumes where it
 * stopped; sleeps and events outlast a deploy; deadlines and cancellation hold across restarts.
 * @module @keel/workflow
 */
export { createMemoryStore } from "./store/memory-store.js";
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

/**
 * `@keel/testing/workflow`: a crash-and-replay kit for `@keel/workflow`, on the virtual clock.
 * @module @keel/testing/workflow
 */
export { type CrashingStore, crashingStore } from "./crashing-store.js";
export { type TestWorkflowOptions, testWorkflow, type WorkflowTestRun } from "./test-workflow.js";

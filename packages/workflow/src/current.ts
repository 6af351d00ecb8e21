/**
 * Where a workflow operation runs: in a body (its incarnation), inside a step (the step's info: the
 * body's operations are refused there, `stepInfo()` answers), or outside any workflow (null). One
 * context for both, so a step sets it once: `Context.with` builds a frame per call, and a step used
 * to make two (the incarnation cleared, the step's info set).
 * @module
 */
import { createContext } from "@keel/core";
import { Incarnation } from "./incarnation.js";

/** What `stepInfo()` reads inside a step (see `StepInfo` in step.ts). */
export interface StepInfoValue {
  readonly executionId: string;
  readonly key: string;
  readonly idempotencyKey: string;
}

export const CURRENT = createContext<Incarnation | StepInfoValue | null>("keel.workflow", null);

/** The incarnation of the body the caller runs in; null inside a step or outside a workflow. */
export function incarnationOf(current: Incarnation | StepInfoValue | null): Incarnation | null {
  return current instanceof Incarnation ? current : null;
}

/** The step's info inside a step; null in a body or outside a workflow. */
export function stepInfoOf(current: Incarnation | StepInfoValue | null): StepInfoValue | null {
  return current === null || current instanceof Incarnation ? null : current;
}

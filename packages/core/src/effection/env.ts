/**
 * The Keel environment that travels through effection code, so that Keel code nested inside it
 * (`toEffection` inside `fromEffection`) runs on the outer clock, under the outer deadline and
 * cleanup budget, and reports to the same event stream.
 * @module
 */
import { createContext } from "effection";
import type { ContextValues } from "../kernel/context-values.js";
import type { TaskImpl } from "../kernel/task.js";

/** What `fromEffection` hands to the effection code it runs. */
export interface KeelEnv {
  /** The `effection:<name>` task: the parent, in paths and events, of nested Keel tasks. */
  readonly task: TaskImpl<unknown>;
  /** Its contexts: the clock, the cleanup budget, the random source, user contexts. */
  readonly contexts: ContextValues;
  /** The effective deadline where `fromEffection` was entered (`Infinity` when none). */
  readonly deadline: number;
  /** Lets go of the virtual-clock hold while nested Keel code runs; returns the re-take. */
  pauseHold(): () => void;
}

/** Set on the effection scope that `fromEffection` creates; read by `toEffection`. */
export const KeelEnvContext = createContext<KeelEnv | null>("@keel/core/effection.env", null);

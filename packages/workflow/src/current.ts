/**
 * The incarnation a workflow operation belongs to: set for a body, null inside a step.
 * @module
 */
import { createContext } from "@keel/core";
import type { Incarnation } from "./incarnation.js";

export const CURRENT_INCARNATION = createContext<Incarnation | null>("keel.workflow", null);

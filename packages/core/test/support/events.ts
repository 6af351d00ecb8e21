/**
 * Looking up the harness's observed events (`h.events`, `h.eventsOf(type)`).
 * @module
 */
import type { KeelEvent, Task } from "@keel/core";
import type { Harness } from "@keel/testing";
import { expect } from "vitest";

/** The event a task settles with. */
export type SettleEvent = Extract<KeelEvent, { type: "task:settle" }>;

/** The settle event of the one task named `name` (asserts one such task started). */
export function settleOfNamed(h: Harness, name: string): SettleEvent | undefined {
  const starts = h.eventsOf("task:start").filter((e) => e.name === name);
  expect(starts, `tasks named ${name}`).toHaveLength(1);
  return h.eventsOf("task:settle").find((e) => e.taskId === starts[0]!.taskId);
}

/** The settle event of `task` (asserts there is exactly one). */
export function settleOfTask(h: Harness, task: Task<unknown>): SettleEvent {
  const settles = h.eventsOf("task:settle").filter((e) => e.taskId === task.id);
  expect(settles).toHaveLength(1);
  return settles[0]!;
}

/** Labels of the scopes named by events of a type that carries a scope. */
export function scopeLabels(h: Harness, type: "timeout:fire" | "timeout:superseded"): string[] {
  return h.eventsOf(type).map((e) => e.scope.label);
}

/** How many retry events of each kind the harness saw. */
export function retryEventCounts(h: Harness) {
  return {
    attempt: h.eventsOf("retry:attempt").length,
    sleep: h.eventsOf("retry:sleep").length,
    giveup: h.eventsOf("retry:giveup").length,
    unreachable: h.eventsOf("retry:unreachable").length,
  };
}

/**
 * Comparing harness logs (`h.log`, entries `text@<now>`) where entries of different tasks at one
 * instant have no order of their own.
 * @module
 */
import { expect } from "vitest";

/**
 * Compares a log with the expected entries: a string is one entry in order; an array is a group of
 * entries of different tasks at the same instant, compared as a set.
 */
export function expectLog(log: readonly string[], expected: ReadonlyArray<string | readonly string[]>): void {
  const groups = expected.map((g) => (typeof g === "string" ? [g] : [...g]));
  const actual: string[][] = [];
  let i = 0;
  for (const g of groups) {
    actual.push(log.slice(i, i + g.length).sort());
    i += g.length;
  }
  expect({ groups: actual, rest: log.slice(i) }, `log was ${JSON.stringify(log)}`).toEqual({
    groups: groups.map((g) => [...g].sort()),
    rest: [],
  });
}

/** Log entries grouped by instant, in time order: entries at one instant compare as a set. */
export function byInstant(log: readonly string[]): Set<string>[] {
  const groups: Set<string>[] = [];
  let last: string | null = null;
  for (const entry of log) {
    const at = entry.slice(entry.lastIndexOf("@") + 1);
    if (at !== last) groups.push(new Set());
    last = at;
    groups[groups.length - 1]!.add(entry);
  }
  return groups;
}

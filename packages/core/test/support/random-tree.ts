/**
 * Random trees of Keel operations for the kernel's property test (`test/property.test.ts`).
 *
 * A tree is a list of steps run in sequence by one task; composite steps hold further lists. The
 * interpreter lives in the test; this module only describes the shapes, generates them, prints them
 * and measures them (the time bound of property 3 is computed from {@link timeBudgetOf}).
 * @module
 */
import fc from "fast-check";

/** One step of a sequence. `id` is unique in its tree (`n0`, `n1`, … in preorder). */
export type Step =
  | { readonly kind: "sleep"; readonly id: string; readonly ms: number }
  | { readonly kind: "throw"; readonly id: string }
  /** The running task sleeps `delayMs`, then calls `cancel()` on itself (only where it has a handle). */
  | { readonly kind: "cancelSelf"; readonly id: string; readonly delayMs: number }
  /**
   * Spawns a canceller that sleeps `delayMs`, then cancels the task spawned last before it in the
   * same sequence and waits for it to unwind (a no-op when there is none).
   */
  | { readonly kind: "cancelSibling"; readonly id: string; readonly delayMs: number }
  | { readonly kind: "spawn"; readonly id: string; readonly join: boolean; readonly body: readonly Step[] }
  | { readonly kind: "timeout"; readonly id: string; readonly ms: number; readonly body: readonly Step[] }
  /** `try { body } finally { yield* sleep(cleanupMs) }`. */
  | {
      readonly kind: "finally";
      readonly id: string;
      readonly cleanupMs: number;
      readonly body: readonly Step[];
    }
  | { readonly kind: "scoped"; readonly id: string; readonly body: readonly Step[] }
  | { readonly kind: "all"; readonly id: string; readonly branches: readonly (readonly Step[])[] }
  | { readonly kind: "race"; readonly id: string; readonly branches: readonly (readonly Step[])[] }
  | { readonly kind: "shield"; readonly id: string; readonly limitMs: number; readonly body: readonly Step[] }
  /** `try { body } catch (e) { if (!isCancelled(e)) throw e }`: the rare misbehaving catch. */
  | { readonly kind: "swallow"; readonly id: string; readonly body: readonly Step[] };

export type Tree = readonly Step[];

/** The cleanup budget every property run uses (small, so overruns happen within a short tree). */
export const CLEANUP_BUDGET_MS = 100;

// ---- generation -------------------------------------------------------------------------------

/** A step before numbering: the same shape without ids. */
type Draft = DistributiveOmit<Step, "id" | "body" | "branches"> & {
  body?: readonly Draft[];
  branches?: readonly (readonly Draft[])[];
};
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

const ms = (max: number) => fc.integer({ min: 0, max });
/** Mostly short cleanups; now and then one longer than the budget, to force a cut. */
const cleanupMs = fc.oneof(
  { weight: 3, arbitrary: ms(40) },
  { weight: 1, arbitrary: fc.constantFrom(150, 250) },
);

const cache = new Map<string, fc.Arbitrary<readonly Draft[]>>();

/**
 * A sequence of up to `maxLength` steps nested at most `depth` more levels. `hasHandle` says whether
 * the task running the sequence holds its own `Task` (the root and spawned tasks do; the tasks that
 * `all`, `race` and `shield` start for a body do not), so `cancelSelf` appears only where it can run.
 */
function sequence(depth: number, hasHandle: boolean, maxLength = 3): fc.Arbitrary<readonly Draft[]> {
  const key = `${depth}/${hasHandle}/${maxLength}`;
  const hit = cache.get(key);
  if (hit) return hit;
  const own = (d: number) => sequence(d, hasHandle);
  const other = (d: number) => sequence(d, false);
  const owned = (d: number) => sequence(d, true);
  const leaves: fc.WeightedArbitrary<Draft>[] = [
    { weight: 20, arbitrary: ms(60).map((n) => ({ kind: "sleep", ms: n })) },
    { weight: 2, arbitrary: fc.constant({ kind: "throw" }) },
    { weight: 8, arbitrary: ms(60).map((n) => ({ kind: "cancelSibling", delayMs: n })) },
  ];
  if (hasHandle)
    leaves.push({ weight: 5, arbitrary: ms(60).map((n) => ({ kind: "cancelSelf", delayMs: n })) });
  const composites: fc.WeightedArbitrary<Draft>[] =
    depth <= 0
      ? []
      : [
          {
            weight: 12,
            arbitrary: fc
              .record({ join: fc.boolean(), body: owned(depth - 1) })
              .map((r) => ({ kind: "spawn", ...r })),
          },
          {
            weight: 12,
            arbitrary: fc
              .record({ ms: fc.integer({ min: 0, max: 80 }), body: own(depth - 1) })
              .map((r) => ({ kind: "timeout", ...r })),
          },
          {
            weight: 16,
            arbitrary: fc.record({ cleanupMs, body: own(depth - 1) }).map((r) => ({ kind: "finally", ...r })),
          },
          { weight: 5, arbitrary: own(depth - 1).map((body) => ({ kind: "scoped", body })) },
          {
            weight: 6,
            arbitrary: fc
              .array(other(depth - 1), { maxLength: 3 })
              .map((branches) => ({ kind: "all", branches })),
          },
          {
            weight: 9,
            arbitrary: fc
              .array(other(depth - 1), { minLength: 1, maxLength: 3 })
              .map((branches) => ({ kind: "race", branches })),
          },
          {
            weight: 6,
            arbitrary: fc
              .record({ limitMs: fc.integer({ min: 1, max: 150 }), body: other(depth - 1) })
              .map((r) => ({ kind: "shield", ...r })),
          },
          { weight: 3, arbitrary: own(depth - 1).map((body) => ({ kind: "swallow", body })) },
        ];
  const arb = fc.array(fc.oneof(...leaves, ...composites), { maxLength });
  cache.set(key, arb);
  return arb;
}

/** Gives every step its preorder id, so logs and printed trees can name them. */
function numbered(drafts: readonly Draft[]): Tree {
  let next = 0;
  const visit = (list: readonly Draft[]): Step[] =>
    list.map((d) => {
      const id = `n${next++}`;
      const { body, branches, ...rest } = d;
      const step = { ...rest, id } as Record<string, unknown>;
      if (body) step.body = visit(body);
      if (branches) step.branches = branches.map(visit);
      return step as Step;
    });
  return visit(drafts);
}

/** Random trees: a root sequence of up to 5 steps, nesting up to `maxDepth` composite levels. */
export function treeArbitrary(maxDepth = 3): fc.Arbitrary<Tree> {
  return sequence(maxDepth, true, 5).map(numbered);
}

// ---- printing and measuring -------------------------------------------------------------------

/** A compact one-line form, for failure reports: `[n0 sleep(10), n1 timeout(5){n2 sleep(20)}]`. */
export function printTree(tree: Tree): string {
  const seq = (list: readonly Step[]): string => `[${list.map(printStep).join(", ")}]`;
  const printStep = (s: Step): string => {
    switch (s.kind) {
      case "sleep":
        return `${s.id} sleep(${s.ms})`;
      case "throw":
        return `${s.id} throw`;
      case "cancelSelf":
        return `${s.id} cancelSelf(after ${s.delayMs})`;
      case "cancelSibling":
        return `${s.id} cancelSibling(after ${s.delayMs})`;
      case "spawn":
        return `${s.id} spawn${s.join ? "+join" : ""}${seq(s.body)}`;
      case "timeout":
        return `${s.id} timeout(${s.ms})${seq(s.body)}`;
      case "finally":
        return `${s.id} try${seq(s.body)}finally(sleep ${s.cleanupMs})`;
      case "scoped":
        return `${s.id} scoped${seq(s.body)}`;
      case "all":
        return `${s.id} all(${s.branches.map(seq).join(" | ")})`;
      case "race":
        return `${s.id} race(${s.branches.map(seq).join(" | ")})`;
      case "shield":
        return `${s.id} shield(limit ${s.limitMs})${seq(s.body)}`;
      case "swallow":
        return `${s.id} swallow${seq(s.body)}`;
    }
  };
  return seq(tree);
}

/** The nested lists of a step (empty for a leaf). */
export function childrenOf(s: Step): readonly (readonly Step[])[] {
  if ("branches" in s) return s.branches;
  if ("body" in s) return [s.body];
  return [];
}

/**
 * Every duration written in the tree: sleeps, cancel delays, timeouts, cleanup sleeps and shield
 * limits, each counted once (no step runs more than once: the trees have no loops or retries).
 */
export function timeBudgetOf(tree: Tree): number {
  let sum = 0;
  const visit = (list: readonly Step[]) => {
    for (const s of list) {
      if (s.kind === "sleep" || s.kind === "timeout") sum += s.ms;
      else if (s.kind === "cancelSelf" || s.kind === "cancelSibling") sum += s.delayMs;
      else if (s.kind === "finally") sum += s.cleanupMs;
      else if (s.kind === "shield") sum += s.limitMs;
      for (const c of childrenOf(s)) visit(c);
    }
  };
  visit(tree);
  return sum;
}

/** How many composite steps nest at the deepest point (0 for a flat sequence). */
export function depthOf(tree: Tree): number {
  let max = 0;
  for (const s of tree) for (const c of childrenOf(s)) max = Math.max(max, 1 + depthOf(c));
  return max;
}

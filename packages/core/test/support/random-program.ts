/**
 * Random adversarial programs for the attacker property test (`test/adversarial-property.test.ts`)
 * and `npm run fuzz`: trees of spawn, scoped, all, race, timeout, shield, retry, a semaphore, a
 * channel and mapLimit, swarms of swallowers and chains of shields in `finally` blocks, with
 * faults: throws in bodies and in `finally`, catches that swallow `Cancelled` (once, or in a loop),
 * hangs, and cancels of a sibling. The interpreter and the checks
 * are in `program-run.ts`; this module describes, generates and prints the programs.
 * @module
 */
import fc from "fast-check";

/** One step of a sequence. `id` is unique in its program (`n0`, `n1`, … in preorder). */
export type Node =
  | { readonly kind: "sleep"; readonly id: string; readonly ms: number }
  /** `suspend()`: waits forever, until cancelled. */
  | { readonly kind: "hang"; readonly id: string }
  | { readonly kind: "throw"; readonly id: string }
  /** Sleeps `delayMs`, then cancels the task spawned last in the same sequence (if any). */
  | { readonly kind: "cancelLast"; readonly id: string; readonly delayMs: number }
  | { readonly kind: "spawn"; readonly id: string; readonly join: boolean; readonly body: Seq }
  | { readonly kind: "scoped"; readonly id: string; readonly body: Seq }
  | { readonly kind: "all"; readonly id: string; readonly branches: readonly Seq[] }
  | { readonly kind: "race"; readonly id: string; readonly branches: readonly Seq[] }
  | { readonly kind: "timeout"; readonly id: string; readonly ms: number; readonly body: Seq }
  | { readonly kind: "shield"; readonly id: string; readonly limitMs: number; readonly body: Seq }
  | { readonly kind: "retry"; readonly id: string; readonly attempts: number; readonly body: Seq }
  /** `sem.use(body)` on the program's one semaphore (2 permits). */
  | { readonly kind: "semaphore"; readonly id: string; readonly body: Seq }
  /** A producer child sends `items` values into a capacity-1 channel; this task receives them, running `body` after each. */
  | { readonly kind: "channel"; readonly id: string; readonly items: number; readonly body: Seq }
  | {
      readonly kind: "mapLimit";
      readonly id: string;
      readonly items: number;
      readonly limit: number;
      readonly body: Seq;
    }
  /** `try { body } finally { fin }`: the `finally` may suspend, throw or hang. */
  | { readonly kind: "finally"; readonly id: string; readonly body: Seq; readonly fin: Seq }
  /**
   * Spawns `count` children that each hang and swallow their cancellation, once (then hang again)
   * or (`loop`) every time, and goes on without waiting: many swallowers in one scope (issue 23).
   */
  | { readonly kind: "swarm"; readonly id: string; readonly count: number; readonly loop: boolean }
  /**
   * Hangs; its `finally` enters a shield (`limitMs`) whose work hangs with a `finally` entering the
   * next shield (`innerLimitMs`), `depth` levels deep, the last one's work a swallower (as `swarm`'s).
   */
  | {
      readonly kind: "shieldChain";
      readonly id: string;
      readonly depth: number;
      readonly limitMs: number;
      readonly innerLimitMs: number;
      readonly loop: boolean;
    }
  /** `try { body } catch (e) { if (!isCancelled(e)) throw e }`, once or (`loop`) until the body returns. */
  | { readonly kind: "swallow"; readonly id: string; readonly loop: boolean; readonly body: Seq };

export type Seq = readonly Node[];

/** A program and the instant its root is cancelled from outside (null: never). */
export interface Program {
  readonly body: Seq;
  readonly cancelAt: number | null;
}

/** The cleanup budget every program runs with (small, so overruns and abandonments happen). */
export const PROGRAM_BUDGET_MS = 50;

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
type Draft = DistributiveOmit<Node, "id" | "body" | "branches" | "fin"> & {
  body?: readonly Draft[];
  branches?: readonly (readonly Draft[])[];
  fin?: readonly Draft[];
};

const ms = (min: number, max: number) => fc.integer({ min, max });
const cache = new Map<number, fc.Arbitrary<readonly Draft[]>>();

/** A sequence of up to `maxLength` steps nesting at most `depth` more composite levels. */
function seq(depth: number, maxLength = 3): fc.Arbitrary<readonly Draft[]> {
  const key = depth * 10 + maxLength;
  const hit = cache.get(key);
  if (hit) return hit;
  const leaves: fc.WeightedArbitrary<Draft>[] = [
    { weight: 20, arbitrary: ms(0, 60).map((n) => ({ kind: "sleep", ms: n })) },
    { weight: 3, arbitrary: fc.constant({ kind: "hang" }) },
    { weight: 4, arbitrary: fc.constant({ kind: "throw" }) },
    { weight: 4, arbitrary: ms(0, 60).map((n) => ({ kind: "cancelLast", delayMs: n })) },
    // The stubborn step: a wait inside a loop that swallows every cancellation (a naive retry loop).
    { weight: 3, arbitrary: fc.constant({ kind: "swallow", loop: true, body: [{ kind: "hang" }] }) },
    {
      weight: 2,
      arbitrary: fc.record({ count: ms(5, 60), loop: fc.boolean() }).map((r) => ({ kind: "swarm", ...r })),
    },
    {
      weight: 2,
      arbitrary: fc
        .record({ depth: ms(1, 5), limitMs: ms(1, 120), innerLimitMs: ms(1, 200), loop: fc.boolean() })
        .map((r) => ({ kind: "shieldChain", ...r })),
    },
  ];
  const body = () => seq(depth - 1);
  const branches = () => fc.array(seq(depth - 1), { minLength: 1, maxLength: 3 });
  const composites: fc.WeightedArbitrary<Draft>[] =
    depth <= 0
      ? []
      : [
          {
            weight: 8,
            arbitrary: fc.record({ join: fc.boolean(), body: body() }).map((r) => ({ kind: "spawn", ...r })),
          },
          { weight: 3, arbitrary: body().map((b) => ({ kind: "scoped", body: b })) },
          { weight: 4, arbitrary: branches().map((b) => ({ kind: "all", branches: b })) },
          { weight: 5, arbitrary: branches().map((b) => ({ kind: "race", branches: b })) },
          {
            weight: 8,
            arbitrary: fc.record({ ms: ms(1, 80), body: body() }).map((r) => ({ kind: "timeout", ...r })),
          },
          {
            weight: 5,
            arbitrary: fc
              .record({ limitMs: ms(1, 120), body: body() })
              .map((r) => ({ kind: "shield", ...r })),
          },
          {
            weight: 4,
            arbitrary: fc.record({ attempts: ms(1, 3), body: body() }).map((r) => ({ kind: "retry", ...r })),
          },
          { weight: 3, arbitrary: body().map((b) => ({ kind: "semaphore", body: b })) },
          {
            weight: 2,
            arbitrary: fc.record({ items: ms(0, 3), body: body() }).map((r) => ({ kind: "channel", ...r })),
          },
          {
            weight: 2,
            arbitrary: fc
              .record({ items: ms(0, 4), limit: ms(1, 2), body: body() })
              .map((r) => ({ kind: "mapLimit", ...r })),
          },
          {
            weight: 10,
            arbitrary: fc.record({ body: body(), fin: body() }).map((r) => ({ kind: "finally", ...r })),
          },
          {
            weight: 4,
            arbitrary: fc
              .record({ loop: fc.boolean(), body: body() })
              .map((r) => ({ kind: "swallow", ...r })),
          },
        ];
  const arb = fc.array(fc.oneof(...leaves, ...composites), { maxLength });
  cache.set(key, arb);
  return arb;
}

function numbered(drafts: readonly Draft[]): Seq {
  let next = 0;
  const visit = (list: readonly Draft[]): Node[] =>
    list.map((d) => {
      const id = `n${next++}`;
      const { body, branches, fin, ...rest } = d;
      const node = { ...rest, id } as Record<string, unknown>;
      if (body) node.body = visit(body);
      if (branches) node.branches = branches.map(visit);
      if (fin) node.fin = visit(fin);
      return node as Node;
    });
  return visit(drafts);
}

/** Random programs nesting up to `maxDepth` composite levels, cancelled from outside 3 times in 4. */
export function programArbitrary(maxDepth = 3): fc.Arbitrary<Program> {
  return fc.record({
    body: seq(maxDepth, 4).map(numbered),
    cancelAt: fc.oneof({ weight: 3, arbitrary: ms(0, 300) }, { weight: 1, arbitrary: fc.constant(null) }),
  });
}

/** A compact one-line form, for counterexample reports. */
export function printProgram(p: Program): string {
  const s = (list: Seq): string => `[${list.map(node).join(", ")}]`;
  const node = (n: Node): string => {
    switch (n.kind) {
      case "sleep":
        return `${n.id} sleep(${n.ms})`;
      case "hang":
      case "throw":
        return `${n.id} ${n.kind}`;
      case "cancelLast":
        return `${n.id} cancelLast(after ${n.delayMs})`;
      case "spawn":
        return `${n.id} spawn${n.join ? "+join" : ""}${s(n.body)}`;
      case "all":
      case "race":
        return `${n.id} ${n.kind}(${n.branches.map(s).join(" | ")})`;
      case "timeout":
        return `${n.id} timeout(${n.ms})${s(n.body)}`;
      case "shield":
        return `${n.id} shield(limit ${n.limitMs})${s(n.body)}`;
      case "retry":
        return `${n.id} retry(${n.attempts})${s(n.body)}`;
      case "channel":
      case "mapLimit":
        return `${n.id} ${n.kind}(${n.items}${n.kind === "mapLimit" ? `, limit ${n.limit}` : ""})${s(n.body)}`;
      case "finally":
        return `${n.id} try${s(n.body)}finally${s(n.fin)}`;
      case "swallow":
        return `${n.id} swallow${n.loop ? "-loop" : ""}${s(n.body)}`;
      case "swarm":
        return `${n.id} swarm(${n.count}${n.loop ? ", loop" : ""})`;
      case "shieldChain":
        return `${n.id} shieldChain(depth ${n.depth}, limit ${n.limitMs}, inner ${n.innerLimitMs}${n.loop ? ", loop" : ""})`;
      default:
        return `${n.id} ${n.kind}${s(n.body)}`;
    }
  };
  return `${s(p.body)} cancel at ${p.cancelAt ?? "never"}`;
}

/** The nested sequences of a node (none for a leaf). */
export function childSeqs(n: Node): readonly Seq[] {
  if ("branches" in n) return n.branches;
  if (n.kind === "finally") return [n.body, n.fin];
  if ("body" in n) return [n.body];
  return [];
}

/**
 * The contract's bound on cancel -> settle for a program (semantics §5, §6): the cut at one budget
 * and abandonment by two; an outermost shield may hold its caller up to its limit, then its work
 * unwinds within two budgets, and the work's own cleanup may open one more bounded step. A shield
 * nested in a shield's work adds no limit of its own (limits nest: it gets at most what is left of
 * the enclosing one), only those budgets. A chain of shields in `finally` blocks is held to the
 * contract's own bound (§6: the outermost limit plus one budget), and a swarm of swallowers to
 * that of any subtree (§5: two budgets, whatever their number), so it adds nothing.
 */
export function settleBoundMs(p: Program): number {
  let bound = 2 * PROGRAM_BUDGET_MS;
  const visit = (list: Seq, inShield: boolean) => {
    for (const n of list) {
      if (n.kind === "shield") bound += (inShield ? 0 : n.limitMs) + 3 * PROGRAM_BUDGET_MS;
      if (n.kind === "shieldChain") bound += (inShield ? 0 : n.limitMs) + PROGRAM_BUDGET_MS;
      for (const c of childSeqs(n)) visit(c, inShield || n.kind === "shield");
    }
  };
  visit(p.body, false);
  return bound;
}

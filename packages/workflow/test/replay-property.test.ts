/**
 * W1/W3 as a property: for random workflow bodies (steps, sequences, all, race, spawn, durable sleeps),
 * a run crashed at any journal entry and replayed on the same store ends with the same result and
 * the same journal keys as a run that was never crashed; the step the crash hit runs twice (as may
 * steps in flight beside it), and none runs a third time.
 */
import { all, type Operation, race, sleep, spawn } from "@keel/core";
import { testWorkflow } from "@keel/testing/workflow";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { sleepFor, step, workflow } from "../src/index.js";

type Program =
  | { readonly t: "step"; readonly name: string; readonly ms: number }
  | { readonly t: "seq"; readonly items: readonly Program[] }
  | { readonly t: "all"; readonly items: readonly Program[] }
  | { readonly t: "spawn"; readonly body: Program }
  | { readonly t: "race"; readonly items: readonly Program[] }
  | { readonly t: "sleep"; readonly ms: number };

/**
 * Bodies: a race never holds a durable sleep. A sleep's instant is absolute, so a downtime longer
 * than it lets it win a race that the step beside it won in a run never crashed: a legitimate
 * difference (the timer did fire first), not a replay's.
 */
const bodies = fc.letrec<{ p: Program; noSleep: Program }>((tie) => ({
  p: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.record({
      t: fc.constant("step" as const),
      name: fc.constantFrom("a", "b", "c"),
      ms: fc.integer({ min: 0, max: 50 }),
    }),
    fc.record({ t: fc.constant("sleep" as const), ms: fc.constantFrom(0, 10, 5_000, 86_400_000) }),
    fc.record({ t: fc.constant("seq" as const), items: fc.array(tie("p"), { minLength: 1, maxLength: 3 }) }),
    fc.record({ t: fc.constant("all" as const), items: fc.array(tie("p"), { minLength: 1, maxLength: 3 }) }),
    fc.record({ t: fc.constant("spawn" as const), body: tie("p") }),
    fc.record({
      t: fc.constant("race" as const),
      items: fc.array(tie("noSleep"), { minLength: 1, maxLength: 3 }),
    }),
  ),
  noSleep: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.record({
      t: fc.constant("step" as const),
      name: fc.constantFrom("a", "b", "c"),
      ms: fc.integer({ min: 0, max: 50 }),
    }),
    fc.record({
      t: fc.constant("seq" as const),
      items: fc.array(tie("noSleep"), { minLength: 1, maxLength: 3 }),
    }),
    fc.record({
      t: fc.constant("all" as const),
      items: fc.array(tie("noSleep"), { minLength: 1, maxLength: 3 }),
    }),
  ),
}));
const program: fc.Arbitrary<Program> = bodies.p;

function hasRace(p: Program): boolean {
  if (p.t === "race") return true;
  if (p.t === "seq" || p.t === "all") return p.items.some(hasRace);
  return p.t === "spawn" ? hasRace(p.body) : false;
}

function* interpret(p: Program, ran: string[]): Operation<string> {
  switch (p.t) {
    case "step":
      return yield* step(p.name, function* () {
        ran.push(p.name);
        yield* sleep(p.ms);
        return `${p.name}${p.ms}`;
      });
    case "sleep":
      yield* sleepFor(p.ms);
      return "z";
    case "seq": {
      let out = "";
      for (const item of p.items) out += yield* interpret(item, ran);
      return `(${out})`;
    }
    case "all": {
      const parts = yield* all(p.items.map((item) => () => interpret(item, ran)));
      return `[${parts.join(",")}]`;
    }
    case "race":
      return `<${yield* race(p.items.map((item) => () => interpret(item, ran)))}>`;
    case "spawn": {
      const task = yield* spawn(() => interpret(p.body, ran));
      return `{${yield* task}}`;
    }
  }
}

describe("W1/W3 as a property: a crash at any entry replays to the same result and journal", () => {
  it("holds for random bodies (60 here; KEEL_PROPERTY_RUNS=N for more), each crashed at a random step", async () => {
    await fc.assert(
      fc.asyncProperty(program, fc.nat(), async (p, pick) => {
        const ran: string[] = [];
        const w = workflow("random", () => interpret(p, ran));
        const reference = await testWorkflow(w, null);
        expect(reference.status).toBe("completed");
        // Parked and replayed (a long sleep), never crashed: no step ran twice, not even a racer
        // that lost (a replay answers in the journal's order, so the race is decided as it was).
        expect(reference.ranAgain).toEqual([]);
        const steps = reference.journal.filter((e) => e.kind === "step").map((e) => e.key);
        if (steps.length === 0) return;
        const at = steps[pick % steps.length]!;
        const crashed = await testWorkflow(w, null, { crashAt: at });
        expect(crashed.status).toBe("completed");
        expect([...crashed.runs.values()].every((n) => n <= 2)).toBe(true);
        // A race is decided by what is journaled first: a crash changes the timing (the step in
        // flight runs again from its start while the other racers replay at once), so a race may be
        // won by another racer after a crash, as it may in any run. The rest must be the same.
        if (hasRace(p)) return;
        expect(crashed.result).toEqual(reference.result);
        expect(crashed.journal.map((e) => e.key).sort()).toEqual(reference.journal.map((e) => e.key).sort());
        // The step the crash hit ran again, as may others in flight beside it; none ran a third time.
        expect(crashed.ranAgain).toContain(at.slice("step:".length));
      }),
      { numRuns: Number(process.env.KEEL_PROPERTY_RUNS ?? 60) },
    );
  }, 120_000);
});

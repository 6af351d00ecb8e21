/**
 * The attacker, kept (issue 11): random adversarial programs (`support/random-program.ts`) run on
 * the virtual clock, each checked by `support/program-run.ts` for what the contract promises.
 *
 * Seeded: `KEEL_PROPERTY_SEED=<n>` replays a run (a failure prints its seed, path and program);
 * `KEEL_PROPERTY_RUNS=<n>` changes how many programs run (default 300). `npm run fuzz` runs many
 * thousands and prints the seed of every counterexample.
 */
import fc from "fast-check";
import { describe, it } from "vitest";
import { checkProgram } from "./support/program-run.js";
import { printProgram, programArbitrary } from "./support/random-program.js";

const SEED = Number(process.env.KEEL_PROPERTY_SEED ?? 20_261_202);
const NUM_RUNS = Number(process.env.KEEL_PROPERTY_RUNS ?? 300);

describe("random adversarial programs (semantics §2, §5, §6)", () => {
  it("settle in time, leave nothing, run every finally once, and lose no error", async () => {
    await fc.assert(
      fc.asyncProperty(programArbitrary(), async (program) => {
        const problems = await checkProgram(program);
        if (problems.length > 0) throw new Error(`${problems.join("\n")}\nprogram: ${printProgram(program)}`);
      }),
      { seed: SEED, numRuns: NUM_RUNS, endOnFailure: true },
    );
  }, 300_000);
});

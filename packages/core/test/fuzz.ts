/**
 * `npm run fuzz`: the attacker property test at scale. Runs `KEEL_FUZZ_PROGRAMS` random adversarial
 * programs (default 5000) in batches of 250, one seed per batch starting at `KEEL_PROPERTY_SEED`
 * (default: from the time), and prints every counterexample with its seed, the command that replays
 * it, the program and the broken promises. Exits 1 if any was found.
 * @module
 */
import fc from "fast-check";
import { checkProgram } from "./support/program-run.js";
import { type Program, printProgram, programArbitrary } from "./support/random-program.js";

const BATCH = 250;
const total = Number(process.env.KEEL_FUZZ_PROGRAMS ?? 5000);
const firstSeed = Number(process.env.KEEL_PROPERTY_SEED ?? Date.now() % 2 ** 31);
let failures = 0;
const startedAt = Date.now();

for (let done = 0, seed = firstSeed; done < total; done += BATCH, seed++) {
  const details = await fc.check(
    fc.asyncProperty(programArbitrary(), async (program) => {
      const problems = await checkProgram(program);
      if (problems.length > 0) throw new Error(problems.join("\n  "));
    }),
    { seed, numRuns: Math.min(BATCH, total - done), endOnFailure: true },
  );
  if (!details.failed) continue;
  failures++;
  const [program] = details.counterexample as [Program];
  const error = details.errorInstance as Error | undefined;
  process.stdout.write(
    [
      `counterexample: seed ${seed}, path ${details.counterexamplePath}`,
      `  replay: KEEL_PROPERTY_SEED=${seed} KEEL_PROPERTY_RUNS=${details.numRuns} npx vitest run packages/core/test/adversarial-property.test.ts`,
      `  program: ${printProgram(program)}`,
      `  ${error?.message ?? String(details.errorInstance)}`,
      "",
    ].join("\n"),
  );
}
const seconds = ((Date.now() - startedAt) / 1000).toFixed(1);
process.stdout.write(
  `fuzz: ${total} programs from seed ${firstSeed} in ${seconds} s; ${failures} counterexample batch(es)\n`,
);
process.exit(failures > 0 ? 1 : 0);

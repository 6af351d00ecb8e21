/**
 * `npm run tour`: six scenarios of Keel's semantics, each on its own virtual clock, so the whole
 * demo runs in milliseconds and prints the same trace every time. examples/test/demo.test.ts runs
 * the same functions and pins their facts, so this trace cannot silently drift from the runtime.
 * @module
 */
import { asyncCleanup } from "./scenarios/async-cleanup.js";
import { deadlineTravels } from "./scenarios/deadline-travels.js";
import { hungCleanup } from "./scenarios/hung-cleanup.js";
import { innerTimeoutCaught } from "./scenarios/inner-timeout-caught.js";
import type { ScenarioResult } from "./scenarios/narration.js";
import { outerDeadlineWins } from "./scenarios/outer-deadline-wins.js";
import { shieldedFlush } from "./scenarios/shielded-flush.js";

function print(result: ScenarioResult<unknown>): void {
  console.log(`\n${result.title}`);
  for (const line of result.lines) console.log(`  ${line}`);
}

console.log("Keel demo: every timestamp is virtual time, in ms from the scenario's start.");
print(await innerTimeoutCaught());
print(await outerDeadlineWins());
const travel = await deadlineTravels();
print(travel);
print(await asyncCleanup());
print(await hungCleanup());
print(await shieldedFlush());

console.log(`\nLive task tree of scenario 3 at t=${travel.facts.treeAt}ms:`);
for (const line of travel.facts.tree.split("\n")) console.log(`  ${line}`);

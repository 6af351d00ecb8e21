/**
 * Scenario 5: a cleanup that hangs is cut when its budget runs out, and the cut is reported as a
 * `cleanup:overrun` event; outer `finally` blocks still run (semantics §5).
 * @module
 */
import { run, sleep, spawn, suspend, withCleanupBudget } from "@keel/core";
import { createNarration, type ScenarioResult } from "./narration.js";

export interface HungCleanupFacts {
  readonly overruns: readonly { at: number; budgetMs: number; waitingOn: string | null }[];
  readonly outerFinallyAt: number;
  readonly hungStepFinished: boolean;
  readonly cancelSettledAt: number;
  readonly exporterState: string;
}

const BUDGET_MS = 250;

export async function hungCleanup(): Promise<ScenarioResult<HungCleanupFacts>> {
  const n = createNarration("5. A hung cleanup is cut at its budget and reported");
  let outerFinallyAt = -1;
  let hungStepFinished = false;
  let cancelSettledAt = -1;
  let exporterState = "";

  const service = run(
    function* service() {
      const exporter = yield* spawn(
        () =>
          withCleanupBudget(BUDGET_MS, function* exporter() {
            try {
              try {
                yield* suspend();
              } finally {
                n.say(
                  `exporter cancelled: flushing metrics to a server that never answers (budget ${BUDGET_MS}ms)`,
                );
                yield* sleep(10_000);
                hungStepFinished = true;
              }
            } finally {
              outerFinallyAt = n.clock.now();
              n.say("the hung step was cut; the outer finally still runs");
            }
          }),
        { name: "exporter" },
      );
      yield* sleep(100);
      n.say("service: cancel the exporter");
      yield* exporter.cancel("shutting down");
      cancelSettledAt = n.clock.now();
      exporterState = exporter.state;
      n.say(`cancel() settled at the budget, not after 10s; exporter is ${exporterState}`);
    },
    { clock: n.clock, onEvent: n.onEvent },
  );

  await service;
  return n.finish({
    overruns: n.events.flatMap((e) =>
      e.type === "cleanup:overrun" ? [{ at: e.at, budgetMs: e.budgetMs, waitingOn: e.waitingOn }] : [],
    ),
    outerFinallyAt,
    hungStepFinished,
    cancelSettledAt,
    exporterState,
  });
}

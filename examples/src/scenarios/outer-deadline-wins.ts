/**
 * Scenario 2: when the outer deadline passes first, or at the same instant, the outer claim wins and
 * the inner timeout stays silent (semantics §3).
 * @module
 */
import { isCancelled, now, run, sleep, TimeoutError, timeout, timeoutAt } from "@keel/core";
import { createNarration, type ScenarioResult } from "./narration.js";

export interface OuterDeadlineFacts {
  /** What the innermost body saw: a `Cancelled`, whose reason names the outer scope. */
  readonly innerSaw: string;
  readonly errorLabel: string;
  readonly caughtAt: number;
  readonly elapsedMs: number;
  /** The second round: both deadlines at one instant. */
  readonly equalDeadlineLabel: string;
  readonly equalCaughtAt: number;
  readonly fired: readonly string[];
}

export async function outerDeadlineWins(): Promise<ScenarioResult<OuterDeadlineFacts>> {
  const n = createNarration("2. An outer deadline wins over an inner one");
  let innerSaw = "";
  let first = { label: "", at: -1, elapsedMs: -1 };
  let equal = { label: "", at: -1 };

  const handler = run(
    function* handler() {
      try {
        yield* timeout(100, function* outer() {
          yield* timeout(500, function* inner() {
            try {
              yield* sleep(1000);
            } catch (e) {
              if (isCancelled(e)) {
                innerSaw = `Cancelled(${e.reason.kind} by ${e.reason.scope?.label ?? "?"})`;
                n.say(`inner body sees ${innerSaw}, not a TimeoutError of its own`);
              }
              throw e;
            }
          });
        });
      } catch (e) {
        if (!(e instanceof TimeoutError)) throw e;
        first = { label: e.label, at: n.clock.now(), elapsedMs: e.elapsedMs };
        n.say(
          `caught TimeoutError from ${e.label} after ${e.elapsedMs}ms; the inner timeout(500) stayed silent`,
        );
      }

      // Equal deadlines: both timers fire in one instant, and the outer claim still wins.
      const t0 = yield* now();
      try {
        yield* timeout(200, function* outer() {
          yield* timeoutAt(t0 + 200, sleep(1000));
        });
      } catch (e) {
        if (!(e instanceof TimeoutError)) throw e;
        equal = { label: e.label, at: n.clock.now() };
        n.say(`equal deadlines: the TimeoutError comes from the outer ${e.label}`);
      }
    },
    { clock: n.clock, onEvent: n.onEvent },
  );

  await handler;
  return n.finish({
    innerSaw,
    errorLabel: first.label,
    caughtAt: first.at,
    elapsedMs: first.elapsedMs,
    equalDeadlineLabel: equal.label,
    equalCaughtAt: equal.at,
    fired: n.events.flatMap((e) => (e.type === "timeout:fire" ? [`${e.scope.label}@${e.at}`] : [])),
  });
}

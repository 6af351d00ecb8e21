/**
 * Scenario 1: an inner timeout that fires and is caught leaves the outer one armed (semantics §3).
 * @module
 */
import { remaining, run, sleep, TimeoutError, timeout } from "@keel/core";
import { createNarration, type ScenarioResult } from "./narration.js";

export interface InnerTimeoutFacts {
  readonly value: string;
  readonly caughtAt: number;
  readonly caughtLabel: string;
  /** What the outer timeout had left when the inner one was caught. */
  readonly outerRemainingMs: number;
  readonly stateAfterCatch: string;
  readonly cancellationCountAfterCatch: number;
  readonly finishedAt: number;
  /** Every timeout that fired, as `label@t`. */
  readonly fired: readonly string[];
}

export async function innerTimeoutCaught(): Promise<ScenarioResult<InnerTimeoutFacts>> {
  const n = createNarration("1. An inner timeout, caught, leaves the outer one armed");
  let caught = { at: -1, label: "", remainingMs: -1, state: "", count: -1 };

  const task = run(
    function* handler() {
      return yield* timeout(500, function* withFallback() {
        try {
          return yield* timeout(100, function* fetchPrimary() {
            yield* sleep(1000); // the primary is far too slow
            return "primary";
          });
        } catch (e) {
          if (!(e instanceof TimeoutError)) throw e;
          const remainingMs = yield* remaining();
          caught = {
            at: n.clock.now(),
            label: e.label,
            remainingMs,
            state: task.state,
            count: task.cancellationCount,
          };
          n.say(
            `inner timeout fired; caught TimeoutError, outer still armed (remaining() = ${remainingMs}ms, ` +
              `task ${task.state}, ${task.cancellationCount} cancellation requests)`,
          );
        }
        yield* sleep(200);
        n.say("fallback answered within the outer budget");
        return "fallback";
      });
    },
    { clock: n.clock, onEvent: n.onEvent },
  );

  const value = await task;
  n.say(`handler returned "${value}"; the outer timeout(500) never fired`);
  return n.finish({
    value,
    caughtAt: caught.at,
    caughtLabel: caught.label,
    outerRemainingMs: caught.remainingMs,
    stateAfterCatch: caught.state,
    cancellationCountAfterCatch: caught.count,
    finishedAt: n.clock.now(),
    fired: n.events.flatMap((e) => (e.type === "timeout:fire" ? [`${e.scope.label}@${e.at}`] : [])),
  });
}

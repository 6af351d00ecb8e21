/**
 * Scenario 4: async cleanup in `finally`, several steps deep, runs to completion during
 * cancellation, and `cancel()` settles only once it has (semantics §1, §5).
 * @module
 */
import { type Operation, run, sleep, spawn, suspend } from "@keel/core";
import { createNarration, type ScenarioResult } from "./narration.js";

export interface AsyncCleanupFacts {
  readonly cleanupStartedAt: number;
  readonly flushedAt: number;
  readonly closedAt: number;
  readonly cancelSettledAt: number;
  readonly connectionState: string;
  readonly cancelReason: string;
}

export async function asyncCleanup(): Promise<ScenarioResult<AsyncCleanupFacts>> {
  const n = createNarration("4. Async cleanup in finally completes during cancellation");
  const at = { cleanupStarted: -1, flushed: -1, closed: -1, cancelSettled: -1 };

  function* flushWrites(): Operation<void> {
    yield* sleep(120);
    at.flushed = n.clock.now();
    n.say("  pending writes flushed");
  }
  function* sayGoodbye(): Operation<void> {
    yield* sleep(80);
    n.say("  goodbye sent to the server");
  }
  /** Two async steps, one `yield*` deeper than the `finally` that calls it. */
  function* closeConnection(): Operation<void> {
    yield* flushWrites();
    yield* sayGoodbye();
  }

  let connectionState = "";
  let cancelReason = "";
  const service = run(
    function* service() {
      const connection = yield* spawn(function* connection() {
        try {
          n.say("connection open");
          yield* suspend();
        } finally {
          at.cleanupStarted = n.clock.now();
          n.say("connection cancelled: closing it in finally (async)");
          yield* closeConnection();
          at.closed = n.clock.now();
          n.say("connection closed");
        }
      });
      yield* sleep(100);
      n.say("service: cancel the connection");
      yield* connection.cancel("service is shutting down");
      at.cancelSettled = n.clock.now();
      connectionState = connection.state;
      try {
        yield* connection;
      } catch (e) {
        cancelReason = (e as Error).message;
      }
      n.say(`cancel() settled after the cleanup; connection is ${connectionState}`);
    },
    { clock: n.clock, onEvent: n.onEvent },
  );

  await service;
  return n.finish({
    cleanupStartedAt: at.cleanupStarted,
    flushedAt: at.flushed,
    closedAt: at.closed,
    cancelSettledAt: at.cancelSettled,
    connectionState,
    cancelReason,
  });
}

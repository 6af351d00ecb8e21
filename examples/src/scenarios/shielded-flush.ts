/**
 * Scenario 6: a shielded flush, bounded by its limit, finishes before the cancellation that arrived
 * during it is delivered (semantics §6).
 * @module
 */
import { isCancelled, run, shield, sleep, spawn } from "@keel/core";
import { createNarration, type ScenarioResult } from "./narration.js";

export interface ShieldedFlushFacts {
  readonly cancelRequestedAt: number;
  readonly flushedAt: number;
  readonly deliveredAt: number;
  readonly deliveredKind: string;
  readonly shieldDelays: readonly { at: number; delayedMs: number }[];
  readonly ranPastShield: boolean;
  readonly writerState: string;
}

const FLUSH_MS = 200;
const LIMIT_MS = 1000;

export async function shieldedFlush(): Promise<ScenarioResult<ShieldedFlushFacts>> {
  const n = createNarration("6. A shielded flush finishes before the cancellation is delivered");
  let cancelRequestedAt = -1;
  let flushedAt = -1;
  let delivered = { at: -1, kind: "" };
  let ranPastShield = false;
  let writerState = "";

  const service = run(
    function* service() {
      const writer = yield* spawn(function* writer() {
        try {
          n.say(`writer: flushing 3 buffered records under shield (limitMs ${LIMIT_MS})`);
          yield* shield(
            function* flush() {
              yield* sleep(FLUSH_MS);
              flushedAt = n.clock.now();
              n.say("flush: 3 records written, despite the cancel that came mid-flush");
            },
            { limitMs: LIMIT_MS },
          );
          ranPastShield = true;
        } catch (e) {
          if (isCancelled(e)) {
            delivered = { at: n.clock.now(), kind: e.reason.kind };
            n.say(`writer: Cancelled (${e.reason.kind}) delivered only now, as the shield returns`);
          }
          throw e;
        }
      });
      yield* sleep(50);
      cancelRequestedAt = n.clock.now();
      n.say("service: cancel the writer, mid-flush");
      yield* writer.cancel("shutting down");
      writerState = writer.state;
    },
    { clock: n.clock, onEvent: n.onEvent },
  );

  await service;
  return n.finish({
    cancelRequestedAt,
    flushedAt,
    deliveredAt: delivered.at,
    deliveredKind: delivered.kind,
    shieldDelays: n.events.flatMap((e) =>
      e.type === "shield:delay" ? [{ at: e.at, delayedMs: e.delayedMs }] : [],
    ),
    ranPastShield,
    writerState,
  });
}

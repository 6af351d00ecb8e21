/**
 * The BullMQ engine's `take`: a job the consumer fetched, bounded against a Redis that does not
 * answer.
 * @module
 */
import type { EngineJob } from "../engine.js";
import { EngineTimeoutError } from "../engine-errors.js";
import { QueueClosedError } from "../errors.js";
import type { BullEngine } from "./engine.js";

/**
 * `take`'s run: a job fetched ahead (by the call that ended the previous one, or for a take that
 * gave up) if there is one, else the one the consumer fetches for this take while it waits (the
 * consumer fetches for all the waiting takes at once, see its `pump`). The worker takes only for a
 * free slot, and a fetch starts only for a waiting take with none on its way, so what this process
 * holds stays ≤ concurrency. A take cancelled while it waits leaves its fetch running: its job waits
 * in `fetched` for the next take, or is put back when the consumer closes.
 */
export function* takeJob<T>(
  engine: BullEngine<T>,
  boundMs: number | undefined,
): Generator<unknown, EngineJob<T>, unknown> {
  const consumer = engine.current();
  if (consumer.connecting) yield* consumer.connected();
  for (;;) {
    if (consumer.closing) throw new QueueClosedError(engine.name, "take");
    const h = consumer.next();
    // A job that stalled out comes with `stalledOut`: the worker dead-letters it unrun. One whose
    // lock lapsed while it waited here is no longer this process's: it is not handed over.
    if (h && engine.active.get(h.job.id ?? "") === h) return engine.view(h);
    if (h) continue;
    try {
      yield* consumer.arrival(boundMs);
    } catch (e) {
      consumer.passOn();
      throw e;
    }
    // Waiting for a job that does not come is not a failure; a fetch Redis does not answer is.
    if (boundMs !== undefined && consumer.stuckFor(boundMs)) {
      consumer.passOn();
      throw new EngineTimeoutError(engine.name, "fetching a job", boundMs);
    }
  }
}

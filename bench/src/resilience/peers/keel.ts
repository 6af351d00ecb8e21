/**
 * Keel, from its build (packages/core/dist), on the real clock.
 * @module
 */
import { all, constant, createSemaphore, mapLimit, retry, run, until } from "@keel/core";
import {
  checkRetry,
  checkSemaphore,
  type Occupancy,
  PERMITS,
  type ResiliencePeer,
  unavailable,
} from "../peer.js";

const policy = { backoff: constant(0) };

export const peer: ResiliencePeer = {
  async retryTwice(n) {
    let attempts = 0;
    let failuresLeft = 0;
    function* flaky() {
      attempts++;
      if (failuresLeft-- > 0) throw unavailable();
      return attempts;
    }
    await run(function* retryCalls() {
      for (let i = 0; i < n; i++) {
        failuresLeft = 2;
        yield* retry(flaky, policy);
      }
    });
    checkRetry(n, attempts);
  },

  async semaphore(n) {
    const o: Occupancy = { active: 0, peak: 0, done: 0 };
    const permits = createSemaphore(PERMITS);
    function* hold() {
      if (++o.active > o.peak) o.peak = o.active;
      yield* until(Promise.resolve());
      o.active--;
      o.done++;
    }
    await run(() => all(Array.from({ length: n }, () => permits.use(hold))));
    checkSemaphore(n, o);
  },

  async mapLimit(n) {
    const o: Occupancy = { active: 0, peak: 0, done: 0 };
    function* hold() {
      if (++o.active > o.peak) o.peak = o.active;
      yield* until(Promise.resolve());
      o.active--;
      o.done++;
    }
    await run(() =>
      mapLimit(
        Array.from({ length: n }, (_, i) => i),
        PERMITS,
        hold,
      ),
    );
    checkSemaphore(n, o);
  },
};

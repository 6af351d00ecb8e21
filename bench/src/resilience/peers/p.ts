/**
 * sindresorhus's p-retry 7.1.1 and p-limit 7.3.3.
 * @module
 */
import pLimit from "p-limit";
import pRetry from "p-retry";
import {
  checkRetry,
  checkSemaphore,
  type Occupancy,
  PERMITS,
  type ResiliencePeer,
  unavailable,
} from "../peer.js";

export const peer: ResiliencePeer = {
  async retryTwice(n) {
    let attempts = 0;
    let failuresLeft = 0;
    const flaky = async () => {
      attempts++;
      if (failuresLeft-- > 0) throw unavailable();
      return attempts;
    };
    for (let i = 0; i < n; i++) {
      failuresLeft = 2;
      await pRetry(flaky, { retries: 2, minTimeout: 0, factor: 1 });
    }
    checkRetry(n, attempts);
  },

  async semaphore(n) {
    const o: Occupancy = { active: 0, peak: 0, done: 0 };
    const limit = pLimit(PERMITS);
    const hold = async () => {
      if (++o.active > o.peak) o.peak = o.active;
      await Promise.resolve();
      o.active--;
      o.done++;
    };
    await Promise.all(Array.from({ length: n }, () => limit(hold)));
    checkSemaphore(n, o);
  },
};

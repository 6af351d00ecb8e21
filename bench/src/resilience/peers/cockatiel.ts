/**
 * cockatiel 3.2.1: `retry(handleAll, …)` and `bulkhead(10, Infinity)`.
 * @module
 */
import { bulkhead, ConstantBackoff, handleAll, retry } from "cockatiel";
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
    const policy = retry(handleAll, { maxAttempts: 2, backoff: new ConstantBackoff(0) });
    let attempts = 0;
    let failuresLeft = 0;
    const flaky = async () => {
      attempts++;
      if (failuresLeft-- > 0) throw unavailable();
      return attempts;
    };
    for (let i = 0; i < n; i++) {
      failuresLeft = 2;
      await policy.execute(flaky);
    }
    checkRetry(n, attempts);
  },

  async semaphore(n) {
    const o: Occupancy = { active: 0, peak: 0, done: 0 };
    const permits = bulkhead(PERMITS, Infinity);
    const hold = async () => {
      if (++o.active > o.peak) o.peak = o.active;
      await Promise.resolve();
      o.active--;
      o.done++;
    };
    await Promise.all(Array.from({ length: n }, () => permits.execute(hold)));
    checkSemaphore(n, o);
  },
};

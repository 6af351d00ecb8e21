/**
 * Keel's HTTP client, from its build: `client.getJson` with `retry: false`, default timeouts, on the
 * real clock.
 * @module
 */
import { all, run } from "@keel/core";
import { createHttpClient } from "@keel/core/http";
import { CONNECTIONS, checkReply, type HttpPeer, type Pass, REWARM_REQUESTS } from "../peer.js";

export const peer: HttpPeer = {
  async run(plan) {
    return await run(function* httpBench() {
      const client = yield* createHttpClient({
        baseUrl: plan.origin,
        connections: CONNECTIONS,
        retry: false,
      });
      const passes: Pass[] = [];
      for (let p = 0; p < plan.passes; p++) {
        globalThis.gc?.();
        for (let i = 0; i < REWARM_REQUESTS; i++) checkReply(yield* client.getJson(plan.path));
        const latencies = new Float64Array(plan.n);
        let next = 0;
        function* worker() {
          while (next < plan.n) {
            const i = next++;
            const t0 = performance.now();
            checkReply(yield* client.getJson(plan.path));
            latencies[i] = performance.now() - t0;
          }
        }
        const t0 = performance.now();
        if (plan.inFlight === 1) yield* worker();
        else yield* all(Array.from({ length: plan.inFlight }, () => worker));
        passes.push({ wallMs: performance.now() - t0, latencies });
      }
      return passes;
    });
  },
};

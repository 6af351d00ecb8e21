/**
 * The pass loop of the promise-based clients: `inFlight` async workers over one request function.
 * @module
 */
import { type Pass, type Plan, REWARM_REQUESTS } from "../peer.js";

export async function promisePasses(plan: Plan, get: () => Promise<void>): Promise<Pass[]> {
  const passes: Pass[] = [];
  for (let p = 0; p < plan.passes; p++) {
    globalThis.gc?.();
    for (let i = 0; i < REWARM_REQUESTS; i++) await get();
    const latencies = new Float64Array(plan.n);
    let next = 0;
    const worker = async () => {
      while (next < plan.n) {
        const i = next++;
        const t0 = performance.now();
        await get();
        latencies[i] = performance.now() - t0;
      }
    };
    const t0 = performance.now();
    if (plan.inFlight === 1) await worker();
    else await Promise.all(Array.from({ length: plan.inFlight }, worker));
    passes.push({ wallMs: performance.now() - t0, latencies });
  }
  return passes;
}

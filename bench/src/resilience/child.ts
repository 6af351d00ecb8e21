/**
 * One child process of the resilience benchmark: one library, one row, warm-up samples then measured
 * ones, printed as JSON (`ms` per sample).
 *
 * Usage: node --expose-gc --import tsx src/resilience/child.ts <keel|cockatiel|p> <retry|semaphore|map-limit> <n> <reps> <warmup>
 * @module
 */
import type { ResiliencePeer } from "./peer.js";
import { assertKeelBuilt, report, type Sample } from "./samples.js";

async function loadPeer(id: string): Promise<ResiliencePeer> {
  // Only the library under test is loaded, so the others' modules are not on this heap.
  switch (id) {
    case "keel":
      assertKeelBuilt();
      return (await import("./peers/keel.js")).peer;
    case "cockatiel":
      return (await import("./peers/cockatiel.js")).peer;
    case "p":
      return (await import("./peers/p.js")).peer;
    default:
      throw new Error(`bench: unknown library ${id}`);
  }
}

async function main(): Promise<void> {
  const [id = "", row = "", n = "", reps = "", warmup = ""] = process.argv.slice(2);
  const peer = await loadPeer(id);
  const rows: Record<string, ((n: number) => Promise<void>) | undefined> = {
    retry: peer.retryTwice,
    semaphore: peer.semaphore,
    "map-limit": peer.mapLimit,
  };
  const body = rows[row];
  if (!body) throw new Error(`bench: unknown row ${row}`);
  const once = async (): Promise<Sample> => {
    const t0 = performance.now();
    await body(Number(n));
    return { ms: performance.now() - t0 };
  };
  for (let i = 0; i < Number(warmup); i++) await once();
  const samples: Sample[] = [];
  for (let i = 0; i < Number(reps); i++) {
    globalThis.gc?.();
    samples.push(await once());
  }
  report(samples);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});

/**
 * One child process: one peer, one scenario, warm-up samples then measured ones, printed as JSON.
 *
 * Usage: node --expose-gc --import tsx src/child.ts <peer> <scenario> <n> <reps> <warmup>
 * @module
 */
import type { Peer } from "./peer.js";
import { scenario } from "./scenarios.js";

async function loadPeer(id: string): Promise<Peer> {
  // Only the peer under test is loaded, so the others' modules are not on this heap.
  switch (id) {
    case "keel":
      return (await import("./peers/keel.js")).peer;
    case "keel-contexts":
      return (await import("./peers/keel-contexts.js")).peer;
    case "effection":
      return (await import("./peers/effection.js")).peer;
    case "effect":
      return (await import("./peers/effect.js")).peer;
    case "async":
      return (await import("./peers/async.js")).peer;
    default:
      throw new Error(`bench: unknown peer ${id}`);
  }
}

async function main(): Promise<void> {
  const [peerId = "", scenarioId = "", n = "", reps = "", warmup = ""] = process.argv.slice(2);
  const peer = await loadPeer(peerId);
  const s = scenario(scenarioId);
  const samples: number[] = [];
  for (let i = 0; i < Number(warmup); i++) await s.measure(peer, Number(n));
  for (let i = 0; i < Number(reps); i++) {
    globalThis.gc?.();
    samples.push(await s.measure(peer, Number(n)));
  }
  process.stdout.write(`${JSON.stringify({ samples })}\n`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});

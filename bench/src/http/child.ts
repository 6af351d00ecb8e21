/**
 * One child process of the HTTP benchmark: one client, one mode, warm-up passes then measured ones,
 * printed as JSON (`rps` and `p99Ms` per pass).
 *
 * Usage: node --expose-gc --import tsx src/http/child.ts <keel|undici|fetch> <origin> <n> <inFlight> <reps> <warmup>
 * @module
 */
import { assertKeelBuilt, quantile, report } from "../resilience/samples.js";
import type { HttpPeer } from "./peer.js";

async function loadPeer(id: string): Promise<HttpPeer> {
  // Only the client under test is loaded.
  switch (id) {
    case "keel":
      assertKeelBuilt();
      return (await import("./clients/keel.js")).peer;
    case "undici":
      return (await import("./clients/undici.js")).peer;
    case "fetch":
      return (await import("./clients/fetch.js")).peer;
    default:
      throw new Error(`bench: unknown client ${id}`);
  }
}

async function main(): Promise<void> {
  const [id = "", origin = "", n = "", inFlight = "", reps = "", warmup = ""] = process.argv.slice(2);
  const peer = await loadPeer(id);
  const passes = await peer.run({
    origin,
    path: "/item",
    n: Number(n),
    inFlight: Number(inFlight),
    passes: Number(warmup) + Number(reps),
  });
  report(
    passes.slice(Number(warmup)).map((p) => ({
      rps: (p.latencies.length * 1000) / p.wallMs,
      p99Ms: quantile(p.latencies, 0.99),
    })),
  );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});

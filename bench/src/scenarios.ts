/**
 * The scenarios, each measured the same way for every peer.
 * @module
 */
import type { Counters, Peer } from "./peer.js";

export type ScenarioId = "spawn-join" | "spawn-join-shared" | "microtask" | "macrotask" | "cancel" | "heap";

export interface Scenario {
  readonly id: ScenarioId;
  readonly title: string;
  readonly unit: "ms" | "B";
  /** How many tasks or suspensions one sample covers. */
  readonly n: number;
  /** One sample: milliseconds, or bytes per task. */
  measure(peer: Peer, n: number): Promise<number>;
}

async function elapsedMs(body: () => Promise<void>): Promise<number> {
  const t0 = performance.now();
  await body();
  return performance.now() - t0;
}

/** Resolves once `done()` holds, checking after each macrotask (so every microtask has run). */
async function until(done: () => boolean, what: string): Promise<void> {
  const giveUpAt = performance.now() + 60_000;
  while (!done()) {
    if (performance.now() > giveUpAt) throw new Error(`bench: gave up waiting until ${what}`);
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

function collect(): void {
  const gc = globalThis.gc;
  if (!gc) throw new Error("bench: run node with --expose-gc");
  gc();
  gc();
}

export const scenarios: readonly Scenario[] = [
  {
    id: "spawn-join",
    title: "spawn+join 100k children, a closure per child",
    unit: "ms",
    n: 100_000,
    measure: (peer, n) => elapsedMs(() => peer.spawnJoin(n)),
  },
  {
    id: "spawn-join-shared",
    title: "spawn+join 100k children, one shared body",
    unit: "ms",
    n: 100_000,
    measure: (peer, n) => elapsedMs(() => peer.spawnJoinShared(n)),
  },
  {
    id: "microtask",
    title: "100k sequential suspensions, microtask resume",
    unit: "ms",
    n: 100_000,
    measure: (peer, n) => elapsedMs(() => peer.microtasks(n)),
  },
  {
    id: "macrotask",
    title: "100k sequential suspensions, setImmediate resume",
    unit: "ms",
    n: 100_000,
    measure: (peer, n) => elapsedMs(() => peer.macrotasks(n)),
  },
  {
    id: "cancel",
    title: "cancel 10k suspended tasks, until every finally ran",
    unit: "ms",
    n: 10_000,
    async measure(peer, n) {
      const counters: Counters = { started: 0, finalized: 0 };
      const tasks = peer.suspendMany(n, counters);
      await until(() => counters.started === n, `${n} tasks suspended`);
      const t0 = performance.now();
      await tasks.cancelAll();
      // Measured to the last `finally`, even if the peer's cancel resolved before it.
      await until(() => counters.finalized === n, `${n} finally blocks ran`);
      return performance.now() - t0;
    },
  },
  {
    id: "heap",
    title: "heap per suspended task (100k suspended)",
    unit: "B",
    n: 100_000,
    async measure(peer, n) {
      const counters: Counters = { started: 0, finalized: 0 };
      collect();
      const before = process.memoryUsage().heapUsed;
      const tasks = peer.suspendMany(n, counters);
      await until(() => counters.started === n, `${n} tasks suspended`);
      collect();
      const after = process.memoryUsage().heapUsed;
      await tasks.cancelAll();
      await until(() => counters.finalized === n, `${n} finally blocks ran`);
      return (after - before) / n;
    },
  },
];

export function scenario(id: string): Scenario {
  const s = scenarios.find((x) => x.id === id);
  if (!s) throw new Error(`bench: unknown scenario ${id}`);
  return s;
}

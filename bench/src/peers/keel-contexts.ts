/**
 * Keel with async context in use: every row's work split between two concurrent runs, started in two
 * different `AsyncLocalStorage` contexts, so the scheduler switches contexts as their steps
 * interleave (and Node's promise hooks for the storage are on, as in any app that uses one).
 * @module
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { Peer } from "../peer.js";
import { peer as keel } from "./keel.js";

const request = new AsyncLocalStorage<string>();

/** `start(n / 2)` inside context A and inside context B (both halves equal: the keel peer's sleepers
 * read one shared sample). */
function inTwoContexts<T>(n: number, start: (half: number) => T): [T, T] {
  if (n % 2 !== 0) throw new Error(`bench: keel-contexts needs an even count, got ${n}`);
  return [request.run("A", () => start(n / 2)), request.run("B", () => start(n / 2))];
}

export const peer: Peer = {
  async spawnJoin(n) {
    await Promise.all(inTwoContexts(n, (half) => keel.spawnJoin(half)));
  },
  async spawnJoinShared(n) {
    await Promise.all(inTwoContexts(n, (half) => keel.spawnJoinShared(half)));
  },
  async microtasks(n) {
    await Promise.all(inTwoContexts(n, (half) => keel.microtasks(half)));
  },
  async macrotasks(n) {
    await Promise.all(inTwoContexts(n, (half) => keel.macrotasks(half)));
  },
  suspendMany(n, counters) {
    const [a, b] = inTwoContexts(n, (half) => keel.suspendMany(half, counters));
    return {
      async cancelAll() {
        await Promise.all([a.cancelAll(), b.cancelAll()]);
      },
    };
  },
};

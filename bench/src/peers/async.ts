/**
 * Plain async/await, cancelled through one shared `AbortController`: the floor the others pay over.
 * @module
 */
import { setMaxListeners } from "node:events";
import type { Counters, Peer, Suspended } from "../peer.js";

async function child(): Promise<number> {
  return 1;
}

function aborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

async function sleeper(signal: AbortSignal, counters: Counters): Promise<void> {
  counters.started++;
  try {
    await aborted(signal);
  } catch {
    // The abort is the expected way out.
  } finally {
    counters.finalized++;
  }
}

export const peer: Peer = {
  async spawnJoin(n) {
    const children: Promise<number>[] = [];
    for (let i = 0; i < n; i++) children.push((async () => i)());
    for (const c of children) await c;
  },

  async spawnJoinShared(n) {
    const children: Promise<number>[] = [];
    for (let i = 0; i < n; i++) children.push(child());
    for (const c of children) await c;
  },

  async microtasks(n) {
    for (let i = 0; i < n; i++) await Promise.resolve(i);
  },

  async macrotasks(n) {
    for (let i = 0; i < n; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  },

  suspendMany(n: number, counters: Counters): Suspended {
    const controller = new AbortController();
    // One listener per task is the point here, not a leak.
    setMaxListeners(0, controller.signal);
    const tasks: Promise<void>[] = [];
    for (let i = 0; i < n; i++) tasks.push(sleeper(controller.signal, counters));
    return {
      async cancelAll() {
        controller.abort();
        await Promise.all(tasks);
      },
    };
  },
};

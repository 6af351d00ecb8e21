/**
 * Keel on the real clock.
 * @module
 */
import { action, run, spawn, suspend, type Task, until } from "@keel/core";
import type { Counters, Peer, Suspended } from "../peer.js";

// The children's bodies are made once, so that every sample measures the runtime, not closure creation.
function* child() {
  return 1;
}

function sleeperOf(counters: Counters) {
  return function* sleeper() {
    counters.started++;
    try {
      yield* suspend();
    } finally {
      counters.finalized++;
    }
  };
}

export const peer: Peer = {
  async spawnJoin(n) {
    await run(function* parent() {
      const tasks: Task<number>[] = [];
      for (let i = 0; i < n; i++) tasks.push(yield* spawn(child));
      for (const task of tasks) yield* task;
    });
  },

  async microtasks(n) {
    await run(function* microtasks() {
      for (let i = 0; i < n; i++) yield* until(Promise.resolve(i));
    });
  },

  async macrotasks(n) {
    // Made once and run n times, as the effect peer does with its `Effect.callback`.
    const immediate = action<void>((resolve) => {
      const handle = setImmediate(resolve);
      return () => clearImmediate(handle);
    });
    await run(function* macrotasks() {
      for (let i = 0; i < n; i++) yield* immediate;
    });
  },

  suspendMany(n: number, counters: Counters): Suspended {
    const sleeper = sleeperOf(counters);
    const root = run(function* parent() {
      for (let i = 0; i < n; i++) yield* spawn(sleeper);
      yield* suspend();
    });
    return {
      async cancelAll() {
        await root.cancel();
      },
    };
  },
};

/**
 * Keel on the real clock.
 * @module
 */
import { action, run, spawn, suspend, type Task, until } from "@keel/core";
import type { Counters, Peer, Suspended } from "../peer.js";

// The shared-body row's child, made once (the spawn-join row makes a closure per child instead).
function* child() {
  return 1;
}

// So are the sleepers' and their parent's, for the cancel and heap rows (as the async peer's
// `sleeper` is): a generator function made per sample would hand the runtime a new hidden class per
// sample. They read the sample in progress from here.
let sample: { n: number; counters: Counters } = { n: 0, counters: { started: 0, finalized: 0 } };

function* sleeper() {
  const counters = sample.counters;
  counters.started++;
  try {
    yield* suspend();
  } finally {
    counters.finalized++;
  }
}

function* sleepersParent() {
  for (let i = 0; i < sample.n; i++) yield* spawn(sleeper);
  yield* suspend();
}

export const peer: Peer = {
  async spawnJoin(n) {
    await run(function* parent() {
      const tasks: Task<number>[] = [];
      for (let i = 0; i < n; i++)
        tasks.push(
          yield* spawn(function* () {
            return i;
          }),
        );
      for (const task of tasks) yield* task;
    });
  },

  async spawnJoinShared(n) {
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
    sample = { n, counters };
    const root = run(sleepersParent);
    return {
      async cancelAll() {
        await root.cancel();
      },
    };
  },
};

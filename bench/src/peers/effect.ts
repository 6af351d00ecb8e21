/**
 * effect 4: `Effect.forkChild`, `Fiber.join`, `Fiber.interrupt`, `Effect.never`, `Effect.ensuring`.
 *
 * effect does not run a generator's `finally` on interruption, so the `finally` of the other peers
 * is `Effect.ensuring` here.
 * @module
 */
import { Effect, Fiber } from "effect";
import type { Counters, Peer, Suspended } from "../peer.js";

// The shared-body row's child, made once (the spawn-join row makes a closure per child instead).
const child = Effect.gen(function* child() {
  return 1;
});

// So are the sleepers' and their parent's, for the cancel and heap rows (as the async peer's
// `sleeper` is): a generator function made per sample would hand the runtime a new hidden class per
// sample. They read the sample in progress from here.
let sample: { n: number; counters: Counters } = { n: 0, counters: { started: 0, finalized: 0 } };

const sleeper = Effect.gen(function* sleeper() {
  sample.counters.started++;
  yield* Effect.never;
}).pipe(
  Effect.ensuring(
    Effect.sync(() => {
      sample.counters.finalized++;
    }),
  ),
);

const sleepersParent = Effect.gen(function* parent() {
  for (let i = 0; i < sample.n; i++) yield* Effect.forkChild(sleeper);
  yield* Effect.never;
});

export const peer: Peer = {
  async spawnJoin(n) {
    await Effect.runPromise(
      Effect.gen(function* parent() {
        const fibers: Fiber.Fiber<number>[] = [];
        for (let i = 0; i < n; i++) {
          fibers.push(
            yield* Effect.forkChild(
              Effect.gen(function* () {
                return i;
              }),
            ),
          );
        }
        for (const fiber of fibers) yield* Fiber.join(fiber);
      }),
    );
  },

  async spawnJoinShared(n) {
    await Effect.runPromise(
      Effect.gen(function* parent() {
        const fibers: Fiber.Fiber<number>[] = [];
        for (let i = 0; i < n; i++) {
          fibers.push(yield* Effect.forkChild(child));
        }
        for (const fiber of fibers) yield* Fiber.join(fiber);
      }),
    );
  },

  async microtasks(n) {
    await Effect.runPromise(
      Effect.gen(function* microtasks() {
        for (let i = 0; i < n; i++) yield* Effect.promise(() => Promise.resolve(i));
      }),
    );
  },

  async macrotasks(n) {
    const immediate = Effect.callback<void>((resume) => {
      const handle = setImmediate(() => resume(Effect.void));
      return Effect.sync(() => clearImmediate(handle));
    });
    await Effect.runPromise(
      Effect.gen(function* macrotasks() {
        for (let i = 0; i < n; i++) yield* immediate;
      }),
    );
  },

  suspendMany(n: number, counters: Counters): Suspended {
    sample = { n, counters };
    const root = Effect.runFork(sleepersParent);
    return {
      async cancelAll() {
        await Effect.runPromise(Fiber.interrupt(root));
      },
    };
  },
};

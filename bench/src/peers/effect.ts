/**
 * effect 4: `Effect.forkChild`, `Fiber.join`, `Fiber.interrupt`, `Effect.never`, `Effect.ensuring`.
 *
 * effect does not run a generator's `finally` on interruption, so the `finally` of the other peers
 * is `Effect.ensuring` here.
 * @module
 */
import { Effect, Fiber } from "effect";
import type { Counters, Peer, Suspended } from "../peer.js";

// The children's bodies are made once, so that every sample measures the runtime, not closure creation.
const child = Effect.gen(function* child() {
  return 1;
});

export const peer: Peer = {
  async spawnJoin(n) {
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
    const sleeper = Effect.gen(function* sleeper() {
      counters.started++;
      yield* Effect.never;
    }).pipe(Effect.ensuring(Effect.sync(() => void counters.finalized++)));
    const root = Effect.runFork(
      Effect.gen(function* parent() {
        for (let i = 0; i < n; i++) yield* Effect.forkChild(sleeper);
        yield* Effect.never;
      }),
    );
    return {
      async cancelAll() {
        await Effect.runPromise(Fiber.interrupt(root));
      },
    };
  },
};

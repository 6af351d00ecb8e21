/**
 * What only the embedded queue does: it keeps the newest `deadLetterLimit` dead letters (a worker
 * that runs for months must not grow with them), and counts every one. And the worker's own failure
 * path, on the virtual clock: an error outside a handler fails it after its shutdown.
 */
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { KEEL_CHANNELS, type KeelEvent, run, scoped, sleep, suspend } from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import { createMemoryQueue, type EngineCounts, type ShutdownReport, useWorker } from "@keel/worker";
import { describe, expect, it } from "vitest";

describe("the embedded queue", () => {
  it("keeps the newest deadLetterLimit dead letters, oldest first, and counts them all", async () => {
    const { counts, dead } = await run(
      function* () {
        const queue = yield* createMemoryQueue<number>({ name: "q", deadLetterLimit: 3 });
        yield* useWorker(queue, function* reject(job) {
          throw new TypeError(`bad ${job.data}`);
        });
        for (let i = 1; i <= 5; i++) yield* queue.add(i, { id: `j${i}` });
        while ((yield* queue.counts()).deadLettered < 5) yield* queue.idle();
        return { counts: yield* queue.counts(), dead: yield* queue.deadLetters() };
      },
      { clock: createVirtualClock() },
    );
    expect(counts).toMatchObject({ deadLettered: 5, waiting: 0, active: 0 });
    expect(dead.map((l) => l.id)).toEqual(["j3", "j4", "j5"]);
  });
});

describe("an error outside a handler", () => {
  it("fails the worker after its shutdown has drained the other deliveries (here: the dead-letter sink throws)", async () => {
    const clock = createVirtualClock();
    let report: ShutdownReport | null = null;
    let counts: EngineCounts | null = null;
    const error = await run(
      function* () {
        const queue = yield* createMemoryQueue<string>({ name: "q" });
        try {
          yield* scoped(function* service() {
            yield* useWorker(
              queue,
              function* handle(job) {
                if (job.data === "bad") throw new TypeError("bad payload");
                yield* sleep(100);
              },
              {
                concurrency: 2,
                onShutdown: (r) => {
                  report = r;
                },
                deadLetter: function* store() {
                  throw new Error("dead-letter store down");
                },
              },
            );
            yield* queue.add("slow", { id: "slow" });
            yield* queue.add("bad", { id: "bad" });
            yield* suspend();
          });
        } finally {
          counts = yield* queue.counts();
        }
      },
      { clock },
    ).catch((e: unknown) => e);
    expect((error as Error).message).toBe("dead-letter store down");
    // The slow job was in flight: drained, not cut.
    expect(report).toMatchObject({ inFlightAtStop: 1, finishedInDrain: 1, released: 0, elapsedMs: 100 });
    expect(counts).toMatchObject({ completed: 1, deadLettered: 1, active: 0 });
  });
});

describe("a delivery's events", () => {
  it("are decided once, at its start: one that began with nobody listening reports neither its start nor its completion", async () => {
    // A listener that arrives while job `a` runs sees no `complete` for it (it built no event pair);
    // job `b`, started after, reports both. Fails if a delivery builds its events regardless of
    // listeners, or asks again at its end.
    const seen: string[] = [];
    const listener = (message: unknown) => {
      const e = message as KeelEvent;
      if (e.type === "worker:job") seen.push(`${e.jobId} ${e.transition}`);
    };
    try {
      await run(
        function* () {
          const queue = yield* createMemoryQueue<string>({ name: "q" });
          yield* useWorker(queue, function* handle(job) {
            if (job.data === "a") subscribe(KEEL_CHANNELS.worker, listener);
            yield* sleep(10);
          });
          yield* queue.add("a", { id: "a" });
          while ((yield* queue.counts()).completed < 1) yield* queue.idle();
          yield* queue.add("b", { id: "b" });
          while ((yield* queue.counts()).completed < 2) yield* queue.idle();
        },
        { clock: createVirtualClock() },
      );
    } finally {
      unsubscribe(KEEL_CHANNELS.worker, listener);
    }
    expect(seen).toEqual(["b start", "b complete"]);
  });
});

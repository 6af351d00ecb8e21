/**
 * What only the embedded queue does: it keeps the newest `deadLetterLimit` dead letters (a worker
 * that runs for months must not grow with them), and counts every one.
 */
import { run } from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import { createMemoryQueue, useWorker } from "@keel/worker";
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

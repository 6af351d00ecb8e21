import { constant, formatTaskTree, remaining, sleep, snapshot, useScope } from "@keel/core";
import { createHarness } from "@keel/testing";
import { createMemoryQueue, useWorker } from "@keel/worker";
import { expect, it } from "vitest";

it("smoke", async () => {
  const h = createHarness();
  const out: string[] = [];
  await h.run(function* root() {
    const queue = yield* createMemoryQueue<string>({ name: "q" });
    let calls = 0;
    const worker = yield* useWorker(
      queue,
      function* handle(job) {
        out.push(`${job.id} ${job.attempt} ${yield* remaining()}`);
        if (++calls === 1) throw Object.assign(new Error("busy"), { status: 503 });
        yield* sleep(10);
      },
      { concurrency: 2, timeoutMs: 500, retry: { backoff: constant(100) } },
    );
    yield* queue.add("a", { id: "a", ttlMs: 300 });
    yield* queue.add("b", { id: "b" });
    while ((yield* worker.stats()).completed < 2) yield* sleep(5);
    out.push(JSON.stringify(yield* worker.stats()));
  });
  console.log(
    out,
    h.log,
    h.events.filter((e) => e.type.startsWith("worker")).map((e) => JSON.stringify(e)),
  );
  await h.expectClean();
});

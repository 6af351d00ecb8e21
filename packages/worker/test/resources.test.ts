/**
 * Resources acquired in the worker's scope before the worker (an HTTP client) stay usable by its
 * in-flight jobs until they end: at shutdown the worker, acquired last, is torn down first, and a
 * job cut at the end of the drain can still call the API from its `finally` (semantics §2).
 */
import { type Operation, sleep, spawn, suspend } from "@keel/core";
import { createHttpClient } from "@keel/core/http";
import { createFaultServer, createHarness } from "@keel/testing";
import { createMemoryQueue, useWorker, type Worker } from "@keel/worker";
import { expect, it } from "vitest";

it("a job cut at shutdown calls the API from its finally with the HTTP client of the worker's scope", async () => {
  const h = createHarness();
  const log: string[] = [];
  let worker: Worker | null = null;
  const audits = await h.run(function* test() {
    const server = yield* createFaultServer(
      {
        "/work": { hang: "before-headers" },
        "/audit": { status: 200, json: { audited: true }, delayMs: 50 },
      },
      { connectHang: false },
    );
    const service = yield* spawn(function* service(): Operation<void> {
      const client = yield* createHttpClient({ baseUrl: server.url, retry: false });
      const queue = yield* createMemoryQueue<string>({ name: "orders" });
      worker = yield* useWorker(
        queue,
        function* sync(job) {
          try {
            yield* client.get(`/work?id=${job.id}`);
          } finally {
            const body = yield* client.getJson<{ audited: boolean }>(`/audit?id=${job.id}`);
            log.push(`audited ${job.id}: ${body.audited} @${h.clock.now()}`);
          }
        },
        { drainMs: 100, cleanupBudgetMs: 1000, timeoutMs: 60_000 },
      );
      yield* queue.add("a", { id: "a" });
      yield* suspend();
    });
    yield* sleep(20);
    log.push(`stop @${h.clock.now()}`);
    yield* service.cancel();
    return server.hits("/audit");
  });
  await h.expectClean();
  expect(log).toEqual(["stop @20", "audited a: true @170"]);
  expect(audits).toBe(1);
  expect((worker as Worker | null)?.shutdownReport).toMatchObject({ released: 1, finishedInDrain: 0 });
});

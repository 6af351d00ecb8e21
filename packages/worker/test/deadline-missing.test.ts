/**
 * `run(op, { warnNoDeadline })` with workers: a job added with no deadline, taken by a worker whose
 * tree has none, gets a `deadline:missing` warning; a job with a deadline does not.
 */
import { type KeelEvent, run } from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import { createMemoryQueue, type Job, useWorker } from "@keel/worker";
import { expect, it } from "vitest";

it("warns for a job with no deadline, once per attempt, and not for one with a ttl", async () => {
  const events: KeelEvent[] = [];
  await run(
    function* () {
      const queue = yield* createMemoryQueue<string>({ name: "mail" });
      yield* queue.add("a", { id: "open-ended" });
      yield* queue.add("b", { id: "bounded", ttlMs: 60_000 });
      yield* useWorker(queue, function* send(_job: Job<string>) {}, { timeoutMs: 1000 });
      while ((yield* queue.counts()).completed < 2) yield* queue.idle();
    },
    { clock: createVirtualClock(), warnNoDeadline: true, onEvent: (e) => events.push(e) },
  );
  const missing = events.filter((e) => e.type === "deadline:missing");
  expect(missing).toEqual([
    expect.objectContaining({ type: "deadline:missing", call: "job", label: "mail/open-ended attempt 1/5" }),
  ]);
});

it("says nothing without warnNoDeadline", async () => {
  const events: KeelEvent[] = [];
  await run(
    function* () {
      const queue = yield* createMemoryQueue<string>({ name: "mail" });
      yield* queue.add("a", { id: "open-ended" });
      yield* useWorker(queue, function* send(_job: Job<string>) {}, { timeoutMs: 1000 });
      while ((yield* queue.counts()).completed < 1) yield* queue.idle();
    },
    { clock: createVirtualClock(), onEvent: (e) => events.push(e) },
  );
  expect(events.filter((e) => e.type === "deadline:missing")).toEqual([]);
});

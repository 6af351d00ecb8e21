import { readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { constant, run, sleep, spawn } from "@keel/core";
import { useWorker } from "@keel/worker";
import { useBullQueue } from "@keel/worker/bullmq";
import { Queue as BullQueue } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromiumRequired, findChromium, headless } from "../../core/test/support/chromium.js";
import { serveBullBoard } from "./fixtures/bull-board-server.js";
import { redisUp, removeKeys } from "./redis.js";

const connection = { host: "127.0.0.1", port: 6379 };
const prefix = `keel-board-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
const MARKER = "keel-board-payload-7731";
const required = chromiumRequired;
const chromium = findChromium();
if (redisUp && !chromium && !required)
  console.warn(
    "bull-board page test skipped: Chromium is not installed (apt-get update && apt-get install -y chromium)",
  );

/** What the board's API answers for the `board` queue in `status`. */
interface BoardQueue {
  counts: Record<string, number>;
  jobs: {
    id: string;
    data: unknown;
    returnValue: unknown;
    attempts: number;
    failedReason?: string;
    stacktrace: string[];
    opts: Record<string, unknown>;
  }[];
}

describe.skipIf(!redisUp)("bull-board over a Keel queue (real Redis)", () => {
  let board: { url: string; close(): Promise<void> } | null = null;
  const bull = new BullQueue("board", { connection, prefix });

  beforeAll(async () => {
    // Through Keel: one job completes, one is dead-lettered after a retry, one waits delayed.
    await run(function* () {
      const queue = yield* useBullQueue<{ order: string }>({ name: "board", connection, prefix });
      yield* queue.add({ order: MARKER }, { id: "done-1", ttlMs: 60_000 });
      yield* queue.add({ order: "dead" }, { id: "dead-1", attempts: 2 });
      yield* queue.add({ order: "later" }, { id: "later-1", delayMs: 600_000 });
      const worker = yield* spawn(function* () {
        yield* useWorker(
          queue,
          function* handle(job) {
            if (job.id === "dead-1") throw Object.assign(new Error("upstream 503"), { code: "ECONNRESET" });
            return { shipped: job.data.order };
          },
          { retry: { backoff: constant(10) } },
        );
        for (;;) {
          const c = yield* queue.counts();
          if (c.completed + c.deadLettered >= 2) return;
          yield* sleep(20);
        }
      });
      yield* worker;
    });
    board = await serveBullBoard([bull]);
  }, 20_000);

  afterAll(async () => {
    await board?.close();
    await bull.close();
    await removeKeys(prefix);
  });

  async function api(status: string): Promise<BoardQueue> {
    const query = `activeQueue=board&status=${status}&page=1&jobsPerPage=10`;
    const res = await fetch(`${board?.url}/api/queues?${query}`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { queues: (BoardQueue & { name: string })[] };
    return body.queues.find((q) => q.name === "board") as BoardQueue;
  }

  it("its API lists Keel's jobs: payload as data, state, attempts, return value, failure", async () => {
    const completed = await api("completed");
    expect(completed.counts).toMatchObject({ completed: 1, failed: 1, delayed: 1, active: 0 });
    expect(completed.jobs).toHaveLength(1);
    expect(completed.jobs[0]).toMatchObject({
      id: "done-1",
      data: { order: MARKER },
      returnValue: { shipped: MARKER },
      attempts: 1,
      stacktrace: [],
    });
    const failed = await api("failed");
    expect(failed.jobs[0]).toMatchObject({
      id: "dead-1",
      data: { order: "dead" },
      attempts: 2,
      failedReason: "upstream 503",
      opts: { attempts: 2, keel: { deadReason: "exhausted" } },
    });
    // Newest first, as bull-board shows a job's stack traces.
    expect(failed.jobs[0]!.stacktrace).toHaveLength(2);
    expect(failed.jobs[0]!.stacktrace[0]).toMatch(/^Error: upstream 503\n/);
    const delayed = await api("delayed");
    expect(delayed.jobs[0]).toMatchObject({ id: "later-1", data: { order: "later" }, attempts: 0 });
  });

  it.skipIf(!chromium && !required)(
    "its page in headless Chromium shows a Keel job's payload",
    async () => {
      if (!chromium) throw new Error("KEEL_REQUIRE_CHROMIUM=1 but Chromium is not installed");
      const url = `${board?.url}/queue/board/done-1`;
      const screenshot = path.join(tmpdir(), "keel-bull-board.png");
      rmSync(screenshot, { force: true });
      const [dom] = await Promise.all([
        headless(chromium, url, ["--dump-dom"], { windowSize: "1280,900", timeoutMs: 50_000 }),
        headless(chromium, url, [`--screenshot=${screenshot}`], {
          windowSize: "1280,900",
          timeoutMs: 50_000,
        }),
      ]);
      // The page is built by the UI's scripts from the board's API: the job's id and its payload are
      // in the DOM only if both worked.
      expect(dom).toContain("done-1");
      expect(dom).toContain(MARKER);
      const png = readFileSync(screenshot);
      expect(png.subarray(1, 4).toString("latin1")).toBe("PNG");
      expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([1280, 900]);
      expect(png.length).toBeGreaterThan(20_000);
    },
    60_000,
  );
});

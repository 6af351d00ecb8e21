/**
 * More Redis faults for a BullMQ worker (issue 23), each on a Redis of the test's own (a free port,
 * stopped by its PID; the shared one is never touched): a job's lock lost while its handler runs,
 * a network that stalls or resets its connections (a TCP proxy in front of that Redis), a delivery
 * waiting on a paused Redis as the task tree and the stuck-shutdown report show it, and a Redis
 * restarted without its data. Waits are on conditions, with generous hang guards; nothing asserts a
 * duration.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  action,
  type Cancelled,
  formatTaskTree,
  isCancelled,
  type KeelEvent,
  run,
  sleep,
  snapshot,
  type Task,
  until,
} from "@keel/core";
import { isEngineTimeoutError, isJobLockLostError } from "@keel/worker";
import { useBullQueue } from "@keel/worker/bullmq";
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { CHILD_TEST_TIMEOUT_MS, startChild } from "../../core/test/support/child.js";
import { hasRedisServer, type OwnRedis, startRedis } from "./fixtures/redis-server.js";
import { startProxy, type TcpProxy } from "./fixtures/tcp-proxy.js";
import { engineEvents, eventually, serve } from "./support-faults.js";

const stuckWorker = new URL("./fixtures/stuck-worker.ts", import.meta.url);

let redis: OwnRedis | null = null;
let proxy: TcpProxy | null = null;
const clients: Redis[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
  await proxy?.close();
  proxy = null;
  await redis?.stop();
  redis = null;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A plain client of the test's Redis, for what the test does behind the worker's back. */
function client(own: OwnRedis): Redis {
  const c = new Redis({ ...own.connection, maxRetriesPerRequest: 1 });
  c.on("error", () => {});
  clients.push(c);
  return c;
}

/** A latch a handler waits on (`wait`, named in the task tree) until the test opens it. */
function latch() {
  let open: (() => void) | null = null;
  return {
    wait: () =>
      action<void>((resolve) => {
        open = resolve;
        return () => {};
      }, "the test's latch"),
    get waiting() {
      return open !== null;
    },
    open: () => (open as unknown as () => void)(),
  };
}

function jobEvents(events: KeelEvent[], transition: string) {
  return events.filter(
    (e): e is Extract<KeelEvent, { type: "worker:job" }> =>
      e.type === "worker:job" && e.transition === transition,
  );
}

describe.skipIf(!hasRedisServer)("more Redis faults for a BullMQ worker (a Redis of the test's own)", () => {
  it("a job's lock deleted in Redis while its handler runs: the delivery is cut (Cancelled: the lock lapsed), ends stalled (lock-lost), the worker runs on; BullMQ's stalled check puts the job back and it completes once", async () => {
    const own = (redis = await startRedis());
    const raw = client(own);
    const events: KeelEvent[] = [];
    let seen: unknown = null;
    let unwound = false;
    const held = latch();
    const outcome = await run(
      function* test() {
        // The engine extends locks every 250 ms; BullMQ's stalled check runs every 500 ms.
        const queue = yield* useBullQueue<string>({
          name: "faults",
          connection: own.connection,
          lockMs: 500,
        });
        let first = true;
        const s = yield* serve(queue, { concurrency: 1 }, function* (id) {
          if (id !== "held" || !first) return;
          first = false;
          try {
            yield* held.wait();
          } catch (e) {
            seen = e;
            throw e;
          } finally {
            unwound = true;
          }
        });
        yield* queue.add("x", { id: "held" });
        yield* eventually("the handler waiting", () => held.waiting);
        // BullMQ's key layout: `<prefix>:<queue>:<id>:lock`, holding the token of the worker that runs it.
        const deleted = yield* until(raw.del("bull:faults:held:lock"));
        yield* eventually("the delivery stalled", () => jobEvents(events, "stalled").length > 0);
        const stats = yield* s.worker().stats();
        yield* queue.add("y", { id: "next" });
        yield* eventually("held and next completed", function* () {
          return (yield* queue.counts()).completed === 2;
        });
        const counts = yield* queue.counts();
        yield* s.task.cancel();
        return { deleted, stats, counts, ran: s.ran };
      },
      { onEvent: (e) => events.push(e) },
    );
    expect(outcome.deleted).toBe(1);
    // Its task got a Cancelled that says why, and its finally ran.
    expect(unwound).toBe(true);
    expect(isCancelled(seen)).toBe(true);
    expect((seen as Cancelled).reason.message).toMatch(/^faults\/held: its lock in Redis lapsed/);
    const stalled = jobEvents(events, "stalled");
    expect(stalled).toHaveLength(1);
    expect(stalled[0]).toMatchObject({ jobId: "held", reason: "lock-lost" });
    expect(isJobLockLostError(stalled[0]!.error)).toBe(true);
    expect(outcome.stats).toMatchObject({ stalled: 1, completed: 0, engine: { state: "up" } });
    // Redelivered by the stalled check (the re-run is allowed), then completed once, with `next`.
    expect([...outcome.ran].sort()).toEqual(["held", "held", "next"]);
    expect(
      jobEvents(events, "complete")
        .map((e) => e.jobId)
        .sort(),
    ).toEqual(["held", "next"]);
    expect(outcome.counts).toMatchObject({ completed: 2, active: 0, waiting: 0, deadLettered: 0 });
    expect(engineEvents(events)).toEqual([]);
  }, 60_000);

  it("a job's lock deleted after its handler returned, before its completion lands (held in a stalled proxy): the completion finds the lock gone, the delivery ends stalled (lock-lost), the stalled check puts the job back and it completes once", async () => {
    const own = (redis = await startRedis());
    const p = (proxy = await startProxy(own.connection));
    const raw = client(own);
    const events: KeelEvent[] = [];
    const held = latch();
    let returned = false;
    const outcome = await run(
      function* test() {
        // The worker reaches Redis through the proxy; the test's own client does not. The lock
        // (extended every second) has a second or more left when the proxy starts holding its
        // extensions, for the test's delete to be what removes it.
        const queue = yield* useBullQueue<string>({
          name: "faults",
          connection: { host: "127.0.0.1", port: p.port },
          lockMs: 2_000,
        });
        let first = true;
        const s = yield* serve(queue, { engineTimeoutMs: 20_000 }, function* (id) {
          if (id !== "held" || !first) return;
          first = false;
          yield* held.wait();
          returned = true;
        });
        yield* queue.add("x", { id: "held" });
        yield* eventually("the handler waiting", () => held.waiting);
        p.stall();
        held.open();
        yield* eventually("the handler returned", () => returned);
        // The completion is on its way (held by the proxy); the lock goes before it lands.
        const deleted = yield* until(raw.del("bull:faults:held:lock"));
        p.resume();
        yield* eventually("the delivery stalled", () => jobEvents(events, "stalled").length > 0);
        const stats = yield* s.worker().stats();
        yield* queue.add("y", { id: "next" });
        yield* eventually("held and next completed", function* () {
          return (yield* queue.counts()).completed === 2;
        });
        const counts = yield* queue.counts();
        yield* s.task.cancel();
        return { deleted, stats, counts, ran: s.ran };
      },
      { onEvent: (e) => events.push(e) },
    );
    expect(outcome.deleted).toBe(1);
    const stalled = jobEvents(events, "stalled");
    expect(stalled).toHaveLength(1);
    expect(stalled[0]).toMatchObject({ jobId: "held", reason: "lock-lost" });
    expect((stalled[0]!.error as Error).message).toMatch(
      /^faults\/held: this process no longer holds the job \(Missing lock for job held\. moveToFinished\)/,
    );
    expect(outcome.stats).toMatchObject({ stalled: 1, completed: 0 });
    expect([...outcome.ran].sort()).toEqual(["held", "held", "next"]);
    expect(
      jobEvents(events, "complete")
        .map((e) => e.jobId)
        .sort(),
    ).toEqual(["held", "next"]);
    expect(outcome.counts).toMatchObject({ completed: 2, active: 0, waiting: 0, deadLettered: 0 });
  }, 60_000);

  it("a job whose lock lapsed comes back to this same process while its first delivery still runs: each delivery ends as its own lock says (the first stalled, lock-lost; the second completed)", async () => {
    const own = (redis = await startRedis());
    const raw = client(own);
    const events: KeelEvent[] = [];
    const first = latch();
    const second = latch();
    const ends = () =>
      events.flatMap((e) =>
        e.type === "worker:job" && e.jobId === "held" && e.transition !== "start"
          ? [`${e.transition}${e.reason ? ` ${e.reason}` : ""}`]
          : [],
      );
    const outcome = await run(
      function* test() {
        // A long lock: this process's extension (every 30 s) does not see the loss in time, as
        // when its event loop was blocked past lockMs and another process's stalled check ran.
        const queue = yield* useBullQueue<string>({
          name: "faults",
          connection: own.connection,
          lockMs: 60_000,
        });
        let deliveries = 0;
        const s = yield* serve(queue, { concurrency: 2 }, function* (id) {
          if (id !== "held") return;
          yield* (++deliveries === 1 ? first : second).wait();
        });
        yield* queue.add("x", { id: "held" });
        yield* eventually("the first delivery waiting", () => first.waiting);
        // What another process's stalled check does to a job whose lock lapsed: back to wait, the
        // queue's marker set (BullMQ's key layout: `<prefix>:<queue>:<key>`).
        const moved = yield* until(
          raw
            .multi()
            .del("bull:faults:held:lock")
            .lrem("bull:faults:active", 0, "held")
            .lpush("bull:faults:wait", "held")
            .zadd("bull:faults:marker", 0, "0")
            .exec(),
        );
        // This process's free slot takes it again: a second delivery of the same job.
        yield* eventually("the second delivery waiting", () => second.waiting);
        first.open();
        yield* eventually("the first delivery ended", () => ends().length === 1);
        second.open();
        yield* eventually("the second delivery ended", () => ends().length === 2);
        const counts = yield* queue.counts();
        const stats = yield* s.worker().stats();
        yield* s.task.cancel();
        return { moved: moved?.map(([, r]) => r), counts, stats, ran: s.ran };
      },
      { onEvent: (e) => events.push(e) },
    );
    expect(outcome.moved?.slice(0, 3)).toEqual([1, 1, 1]);
    expect(outcome.ran).toEqual(["held", "held"]);
    // The first could not end the job with the second's lock; it says why.
    expect(ends()).toEqual(["stalled lock-lost", "complete"]);
    const stalled = jobEvents(events, "stalled")[0]!;
    expect((stalled.error as Error).message).toBe(
      "faults/held: this process no longer holds the job (its lock lapsed, and a later delivery of the job holds it)",
    );
    expect(outcome.stats).toMatchObject({ completed: 1, stalled: 1 });
    expect(outcome.counts).toMatchObject({ completed: 1, active: 0, waiting: 0, deadLettered: 0 });
  }, 60_000);

  it("a network stall longer than engineTimeoutMs while the worker is idle: its take fails (EngineTimeoutError, fetching a job), the engine down, no failure; resumed: up, and jobs added after are taken", async () => {
    const own = (redis = await startRedis());
    const p = (proxy = await startProxy(own.connection));
    const events: KeelEvent[] = [];
    const outcome = await run(
      function* test() {
        const queue = yield* useBullQueue<string>({
          name: "faults",
          connection: { host: "127.0.0.1", port: p.port },
        });
        const s = yield* serve(queue, { engineTimeoutMs: 300 });
        yield* queue.add("x", { id: "before" });
        yield* eventually("before completed", function* () {
          return (yield* queue.counts()).completed === 1;
        });
        p.stall();
        yield* eventually("the engine down", () => engineEvents(events).includes("down"));
        p.resume();
        yield* eventually("the engine up", () => engineEvents(events).includes("up"));
        for (const id of ["a1", "a2", "a3"]) yield* queue.add("x", { id });
        yield* eventually("4 completed", function* () {
          return (yield* queue.counts()).completed === 4;
        });
        const counts = yield* queue.counts();
        const stats = yield* s.worker().stats();
        yield* s.task.cancel();
        return { counts, stats, ran: s.ran };
      },
      { onEvent: (e) => events.push(e) },
    );
    expect(engineEvents(events)).toEqual(["down", "up"]);
    const down = events.find((e) => e.type === "worker:engine" && e.state === "down") as { error: unknown };
    expect(isEngineTimeoutError(down.error)).toBe(true);
    expect((down.error as Error).message).toMatch(
      /^queue faults: fetching a job got no answer within 300 ms/,
    );
    expect(outcome.ran).toEqual(["before", "a1", "a2", "a3"]);
    expect(outcome.counts).toMatchObject({ completed: 4, active: 0, waiting: 0, deadLettered: 0 });
    expect(outcome.stats).toMatchObject({ completed: 4, stalled: 0, engine: { state: "up" } });
  }, 60_000);

  it("every connection reset mid-run (ECONNRESET): the worker reconnects and goes on, every job completed once, no worker failure", async () => {
    const own = (redis = await startRedis());
    const p = (proxy = await startProxy(own.connection));
    const raw = client(own);
    const connections = () =>
      until(raw.info("stats").then((s) => Number(/total_connections_received:(\d+)/.exec(s)?.[1])));
    const events: KeelEvent[] = [];
    const n = 40;
    const outcome = await run(
      function* test() {
        const queue = yield* useBullQueue<string>({
          name: "faults",
          connection: { host: "127.0.0.1", port: p.port },
          lockMs: 2_000,
          maxStalls: 5,
        });
        const s = yield* serve(queue, { concurrency: 4, engineTimeoutMs: 5_000 }, function* () {
          yield* sleep(5 + Math.floor(Math.random() * 20));
        });
        for (let i = 0; i < n; i++) yield* queue.add("x", { id: `j${i}` });
        const before = yield* connections();
        // Two resets, each while jobs are running (some completed, not all).
        for (const after of [5, 15]) {
          yield* eventually(`${after} completed`, () => jobEvents(events, "complete").length >= after);
          p.reset();
        }
        yield* eventually(`${n} completed`, function* () {
          return (yield* queue.counts()).completed === n;
        });
        const counts = yield* queue.counts();
        const made = (yield* connections()) - before;
        yield* s.task.cancel();
        return { counts, ran: s.ran, made };
      },
      { onEvent: (e) => events.push(e) },
    );
    // The queue's and the worker's connections were made again (the test's own client is direct).
    expect(outcome.made).toBeGreaterThanOrEqual(2);
    const ids = Array.from({ length: n }, (_, i) => `j${i}`).sort();
    expect(outcome.counts).toMatchObject({ completed: n, active: 0, waiting: 0, deadLettered: 0 });
    // Each job ran (a reply lost with its connection may make one run again, as a stall does).
    expect([...new Set(outcome.ran)].sort()).toEqual(ids);
    expect(jobEvents(events, "dead-letter")).toEqual([]);
    expect(jobEvents(events, "retry")).toEqual([]);
  }, 90_000);

  it("a delivery recording its completion on a paused Redis shows in the task tree, named, waiting on the engine's call", async () => {
    const own = (redis = await startRedis());
    const held = latch();
    let returned = false;
    let tree = "";
    const root: Task<{ ran: string[]; completed: number }> = run(function* test() {
      const queue = yield* useBullQueue<string>({ name: "faults", connection: own.connection });
      const s = yield* serve(queue, { engineTimeoutMs: 20_000 }, function* () {
        yield* held.wait();
        returned = true;
      });
      yield* queue.add("x", { id: "held" });
      yield* eventually("the handler waiting", () => held.waiting);
      own.pause();
      held.open();
      yield* eventually("the handler returned", () => returned);
      yield* eventually("the delivery waiting on Redis", () => {
        tree = formatTaskTree(snapshot(root));
        return tree.includes("waiting on bullmq faults: complete held");
      });
      own.resume();
      yield* eventually("held completed", function* () {
        return (yield* queue.counts()).completed === 1;
      });
      const completed = (yield* queue.counts()).completed;
      yield* s.task.cancel();
      return { ran: s.ran, completed };
    });
    const outcome = await root;
    // The delivery's task, under its slot, waits on the call that records its outcome: what it is,
    // on which Redis, and since when; its deadline is the call's bound (engineTimeoutMs).
    expect(tree).toMatch(
      new RegExp(
        `\\n +faults/held attempt 1/5#\\d+ running [^\\n]*, deadline in [^\\n]*, waiting on bullmq faults: complete held on Redis 127\\.0\\.0\\.1:${own.port} for `,
      ),
    );
    expect(tree).toMatch(/faults: slot 1#\d+ running [^\n]*waiting on join faults\/held attempt 1\/5#/);
    expect(outcome).toEqual({ ran: ["held"], completed: 1 });
  }, 60_000);

  it(
    "a shutdown past main's budget while a completion waits on a paused Redis: the stuck tree on stderr names the delivery and the call it waits on, exit 1",
    async () => {
      const own = (redis = await startRedis());
      const dir = mkdtempSync(join(tmpdir(), "keel-stuck-"));
      dirs.push(dir);
      const open = join(dir, "open");
      const child = startChild(stuckWorker, String(own.port), open);
      await child.waitForLine("ready");
      await run(function* add() {
        const queue = yield* useBullQueue<string>({
          name: "faults",
          connection: own.connection,
          prefix: "stuck",
        });
        yield* queue.add("x", { id: "held" });
      });
      await child.waitForLine("started held");
      own.pause();
      writeFileSync(open, "");
      await child.waitForLine("returned held");
      child.process.kill("SIGTERM");
      const exit = await child.exited;
      const stderr = child.stderr();
      expect({ code: exit.code, stderr }).toMatchObject({ code: 1 });
      expect(stderr).toContain("keel: shutdown exceeded its budget of 500 ms; still running:");
      expect(stderr).toMatch(
        new RegExp(
          `faults/held attempt 1/5#\\d+ [^\\n]*waiting on bullmq faults: complete held on Redis 127\\.0\\.0\\.1:${own.port} for `,
        ),
      );
    },
    CHILD_TEST_TIMEOUT_MS,
  );

  it("Redis restarted without its data while a job runs: its completion finds the job gone, the delivery ends stalled (lock-lost: Missing key), the worker runs on; jobs added after complete", async () => {
    const own = (redis = await startRedis({ appendonly: false }));
    const events: KeelEvent[] = [];
    const held = latch();
    const outcome = await run(
      function* test() {
        // A long lock: no extension round (every 30 s) comes between the restart and the completion,
        // so that the completion is what finds the job gone.
        const queue = yield* useBullQueue<string>({
          name: "faults",
          connection: own.connection,
          lockMs: 60_000,
        });
        // A bound long enough for the worker's connection to come back (BullMQ retries each second).
        const s = yield* serve(queue, { engineTimeoutMs: 15_000 }, function* (id) {
          if (id === "held") yield* held.wait();
        });
        yield* queue.add("x", { id: "held" });
        yield* eventually("the handler waiting", () => held.waiting);
        yield* until(own.restart());
        held.open();
        yield* eventually("the delivery stalled", () => jobEvents(events, "stalled").length > 0);
        const stats = yield* s.worker().stats();
        for (const id of ["b1", "b2"]) yield* queue.add("x", { id });
        yield* eventually("2 completed", function* () {
          return (yield* queue.counts()).completed === 2;
        });
        const counts = yield* queue.counts();
        yield* s.task.cancel();
        return { stats, counts, ran: s.ran };
      },
      { onEvent: (e) => events.push(e) },
    );
    const stalled = jobEvents(events, "stalled");
    expect(stalled).toHaveLength(1);
    expect(stalled[0]).toMatchObject({ jobId: "held", reason: "lock-lost" });
    expect(isJobLockLostError(stalled[0]!.error)).toBe(true);
    expect((stalled[0]!.error as Error).message).toMatch(
      /^faults\/held: this process no longer holds the job \(Missing key for job held/,
    );
    expect(outcome.stats).toMatchObject({ stalled: 1, completed: 0 });
    expect(outcome.ran).toEqual(["held", "b1", "b2"]);
    // The job is gone with the data: only the jobs added after are in Redis.
    expect(outcome.counts).toMatchObject({ completed: 2, active: 0, waiting: 0, deadLettered: 0 });
    expect(jobEvents(events, "complete").map((e) => e.jobId)).toEqual(["b1", "b2"]);
  }, 60_000);
});

/**
 * A Redis that does not answer: `useBullQueue`, and a worker's first take, fail with a
 * `RedisUnavailableError` within `connectTimeoutMs` (real closed ports on loopback, wide margins),
 * with nothing printed meanwhile (BullMQ prints every reconnect's error when nobody listens).
 */
import { createServer, type Server, type Socket, connect as tcpConnect } from "node:net";
import { run, suspend } from "@keel/core";
import { useWorker } from "@keel/worker";
import { isRedisUnavailableError, useBullQueue } from "@keel/worker/bullmq";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { CHILD_TEST_TIMEOUT_MS, startChild } from "../../core/test/support/child.js";
import { redisUp, removeKeys } from "./redis.js";

/** A port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

let printed: unknown[][] = [];
beforeEach(() => {
  printed = [];
  for (const method of ["error", "warn", "log"] as const)
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
      printed.push(args);
    });
});
afterEach(() => {
  vi.restoreAllMocks();
});

describe("Redis down at start", () => {
  it("useBullQueue on a closed port fails with RedisUnavailableError within connectTimeoutMs, naming the Redis and what to do, printing nothing", async () => {
    const port = await closedPort();
    const startedAt = performance.now();
    const error = await run(function* () {
      yield* useBullQueue({ name: "down", connection: { host: "127.0.0.1", port }, connectTimeoutMs: 300 });
    }).catch((e: unknown) => e);
    const elapsedMs = performance.now() - startedAt;
    expect(isRedisUnavailableError(error)).toBe(true);
    expect(error).toMatchObject({ name: "RedisUnavailableError", code: "KEEL_REDIS_UNAVAILABLE" });
    expect((error as Error).message).toContain(
      `useBullQueue(down): no answer from Redis at 127.0.0.1:${port} within 300 ms`,
    );
    expect((error as Error).message).toMatch(/ECONNREFUSED.*start Redis there/);
    expect((error as Error).cause).toMatchObject({ code: "ECONNREFUSED" });
    // The bound is 300 ms; the margin is for a loaded machine.
    expect(elapsedMs).toBeLessThan(5_000);
    expect(printed).toEqual([]);
  });

  it(
    "a process whose useBullQueue found no Redis, and caught the error, exits by itself (nothing of the queue keeps it alive)",
    async () => {
      const port = await closedPort();
      const child = startChild(new URL("./fixtures/down-at-start.ts", import.meta.url), String(port));
      const exit = await child.exited;
      expect(child.stdoutLines()).toEqual(["caught KEEL_REDIS_UNAVAILABLE"]);
      expect(exit.code).toBe(0);
    },
    CHILD_TEST_TIMEOUT_MS,
  );

  describe.skipIf(!redisUp)("with Redis up", () => {
    /**
     * A proxy to the Redis at 127.0.0.1:6379 that stops accepting connections once the queue has
     * its own: a worker's first take then finds Redis refusing its connections.
     */
    let proxy: Server | null = null;
    const sockets: Socket[] = [];
    afterEach(() => {
      for (const s of sockets) s.destroy();
      proxy?.close();
    });

    it("a worker whose connections Redis refuses fails its scope with RedisUnavailableError within connectTimeoutMs", async () => {
      proxy = createServer((client) => {
        const upstream = tcpConnect(6379, "127.0.0.1");
        sockets.push(client, upstream);
        client.pipe(upstream).pipe(client);
        client.on("error", () => upstream.destroy());
        upstream.on("error", () => client.destroy());
      });
      const server = proxy;
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      const port = (server.address() as { port: number }).port;
      const startedAt = { at: 0 };
      const prefix = `keel-down-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
      const error = await run(function* () {
        const queue = yield* useBullQueue<string>({
          name: "down",
          connection: { host: "127.0.0.1", port },
          prefix,
          connectTimeoutMs: 300,
        });
        // New connections are refused from here; the queue's own stays up.
        server.close();
        startedAt.at = performance.now();
        yield* useWorker(queue, function* handle() {});
        yield* suspend();
      }).catch((e: unknown) => e);
      const elapsedMs = performance.now() - startedAt.at;
      await removeKeys(prefix);
      expect(isRedisUnavailableError(error)).toBe(true);
      expect((error as Error).message).toContain(
        `bullmq down: a worker: no answer from Redis at 127.0.0.1:${port} within 300 ms`,
      );
      expect(elapsedMs).toBeLessThan(10_000);
      expect(printed).toEqual([]);
    }, 30_000);
  });
});

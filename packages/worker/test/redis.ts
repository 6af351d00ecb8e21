/**
 * Whether the Redis at 127.0.0.1:6379 answers, for the BullMQ test files. Without it they are
 * skipped with one line saying how to start it; with `KEEL_REQUIRE_REDIS=1` (as `.ci/run` sets it)
 * a missing Redis fails instead.
 */
import { createConnection } from "node:net";

const START_REDIS =
  'start Redis with: redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no';

export const redisUp = await new Promise<boolean>((resolve) => {
  const probe = createConnection(6379, "127.0.0.1");
  probe.on("connect", () => {
    probe.destroy();
    resolve(true);
  });
  probe.on("error", () => resolve(false));
});

if (!redisUp) {
  if (process.env.KEEL_REQUIRE_REDIS === "1")
    throw new Error(`KEEL_REQUIRE_REDIS=1 and no Redis at 127.0.0.1:6379: ${START_REDIS}`);
  console.log(`BullMQ suite skipped: no Redis at 127.0.0.1:6379; ${START_REDIS}`);
}

/**
 * Removes every key under `prefix` (a test's own): for what a test cannot obliterate through its
 * queue (a queue that failed to start, a child process that wrote after the obliterate).
 */
export async function removeKeys(prefix: string): Promise<void> {
  const { Redis } = await import("ioredis");
  const redis = new Redis({ host: "127.0.0.1", port: 6379, maxRetriesPerRequest: null });
  try {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
  } finally {
    redis.disconnect();
  }
}

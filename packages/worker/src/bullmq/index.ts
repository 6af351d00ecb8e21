/**
 * `@keel/worker/bullmq`: the BullMQ engine (BullMQ 5 or 6), for jobs that survive a restart and are shared by
 * worker processes on several machines. `bullmq` and a Redis client (`ioredis`) are optional peers.
 * @module @keel/worker/bullmq
 */
import { type Operation, race, resource, sleep, spawn, until } from "@keel/core";
import { Queue as BullQueue, Worker as BullWorker, type ConnectionOptions } from "bullmq";
import { checkKeys, checkMs, checkObject, checkWhole, invalidType } from "../checks.js";
import { type Queue, queueOver } from "../queue.js";
import { describeRedis, lastErrorOf, whenReady } from "./connect.js";
import { BullEngine } from "./engine.js";
import { clientOf } from "./internals.js";

export { isRedisUnavailableError, MissingPackageError, RedisUnavailableError } from "./connect.js";

/** BullMQ's default lock on an active job (and stalled-check period). */
const LOCK_MS = 30_000;
/** BullMQ's default `maxStalledCount`: a job is dead-lettered at its second stall. */
const MAX_STALLS = 1;
/** The bound on the queue's calls for its caller (`callTimeoutMs`). */
const CALL_TIMEOUT_MS = 10_000;
/** How long `useBullQueue` (and a worker's first take) waits for Redis to answer. */
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * Opens a queue on Redis through BullMQ (5 or 6), closed when the caller's scope ends. Jobs, their
 * attempt history and their deadlines live in Redis, as plain BullMQ jobs (the payload is the job's
 * `data`; see the workers guide); `useWorker` over it runs them in this process.
 *
 * **Crashes**: a job is locked in Redis for `lockMs` (default 30 000) while a process runs it, and
 * that process extends the lock every `lockMs / 2`. If the process dies (SIGKILL, a lost machine),
 * the lock lapses and the stalled check of any live worker on the queue (every `lockMs`) puts the
 * job back to wait, with its attempt unspent.
 *
 * **Poison jobs**: a job whose deliveries stalled more than `maxStalls` times (default 1, BullMQ's
 * `maxStalledCount`) is not delivered again: the next worker to fetch it dead-letters it, reason
 * `stalled`, with a `JobStalledOutError` (`KEEL_JOB_STALLED_OUT`) in `deadLetters()`; in Redis it is
 * `failed` with BullMQ's reason, "job stalled more than allowable limit". Such a job usually makes
 * the process running it die (`process.exit`, an out-of-memory kill), so that a fleet of restarted
 * workers would otherwise crash on it forever. `maxStalls: 0` dead-letters a job at its first stall.
 * A lock that lapsed under a live process (an event loop blocked longer than `lockMs`) counts as a
 * stall too. The dead letter is a `worker:job` event (`dead-letter`, reason `stalled`) in the process
 * that fetched the job; that worker's `stats()` and `deadLetter` sink do not see it.
 *
 * **Time**: deadlines are absolute instants of the runtime's clock (the real clock: epoch
 * milliseconds), so the machines sharing a queue need agreeing clocks; delays are Redis-side.
 *
 * **Redis down at start**: the queue waits for Redis for `connectTimeoutMs` (default 10 000), then
 * fails with a `RedisUnavailableError` (`KEEL_REDIS_UNAVAILABLE`) naming the Redis and what to do,
 * its cause the last connection error; a worker's first take waits the same for its own
 * connections. Connection errors are not printed meanwhile (BullMQ prints each reconnect's).
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { isRedisUnavailableError, useBullQueue } from "@keel/worker/bullmq";
 * try {
 *   const counts = await run(function* () {
 *     const queue = yield* useBullQueue<string>({
 *       name: "mail",
 *       connection: { host: "127.0.0.1", port: 6379 },
 *       prefix: `doc-${Date.now()}`, // keys of its own, so the example touches no other queue
 *       connectTimeoutMs: 2000, // how long to wait for Redis (default 10,000)
 *     });
 *     yield* queue.add("hello", { id: "m1" });
 *     const c = yield* queue.counts();
 *     yield* queue.obliterate(); // removes the queue and its jobs from Redis
 *     return c;
 *   });
 *   console.log(counts.waiting); // 1
 * } catch (e) {
 *   if (!isRedisUnavailableError(e)) throw e;
 *   console.log(e.message); // names the Redis it waited for, and how to start one
 * }
 * ```
 * @throws `TypeError` for a missing `name` or `connection`; `RangeError` for a `lockMs` that is not a
 * whole number ≥ 100, a `connectTimeoutMs` that is not a whole number ≥ 1, a `maxStalls` that is
 * not a whole number ≥ 0 or a `callTimeoutMs` that is not a number > 0; `RedisUnavailableError`
 * (from the operation) when Redis does not answer within `connectTimeoutMs`; `MissingPackageError`
 * (from the operation) when BullMQ cannot load `ioredis` (not installed).
 */
export function useBullQueue<T>(options: {
  name: string;
  connection: ConnectionOptions;
  prefix?: string;
  lockMs?: number;
  connectTimeoutMs?: number;
  /** How many times a job's deliveries may stall before it is dead-lettered as `stalled` (default 1). */
  maxStalls?: number;
  /**
   * The bound on each call the queue makes for its caller, `add`, `counts`, `deadLetters` and
   * `obliterate` (default 10,000 ms; `Infinity`: none): with Redis gone or paused, one of them throws
   * an `EngineTimeoutError` naming the call instead of waiting for Redis for ever. A worker's own calls
   * have theirs (`useWorker`'s `engineTimeoutMs`).
   */
  callTimeoutMs?: number;
}): Operation<BullQueueHandle<T>> {
  const o = checkObject("useBullQueue(options)", options);
  checkKeys("useBullQueue(options)", o, [
    "name",
    "connection",
    "prefix",
    "lockMs",
    "connectTimeoutMs",
    "maxStalls",
    "callTimeoutMs",
  ]);
  const lockMs =
    options.lockMs === undefined ? LOCK_MS : checkWhole("useBullQueue({ lockMs })", options.lockMs, 100);
  const connectTimeoutMs =
    options.connectTimeoutMs === undefined
      ? CONNECT_TIMEOUT_MS
      : checkWhole("useBullQueue({ connectTimeoutMs })", options.connectTimeoutMs, 1);
  const maxStalls =
    options.maxStalls === undefined
      ? MAX_STALLS
      : checkWhole("useBullQueue({ maxStalls })", options.maxStalls, 0);
  const callTimeoutMs =
    options.callTimeoutMs === undefined
      ? CALL_TIMEOUT_MS
      : checkMs("useBullQueue({ callTimeoutMs })", options.callTimeoutMs, { min: 1 });
  if (typeof options.name !== "string" || options.name === "")
    throw invalidType("useBullQueue({ name })", "a non-empty string", options.name);
  if (typeof options.connection !== "object" || options.connection === null)
    throw invalidType(
      "useBullQueue({ connection })",
      "Redis connection options or a client",
      options.connection,
    );
  const { name, prefix } = options;
  const connection = { maxRetriesPerRequest: null, ...(options.connection as object) } as ConnectionOptions;
  const redis = { describe: describeRedis(options.connection), connectTimeoutMs, callTimeoutMs };
  return resource<BullQueueHandle<T>>(
    function* bullQueue(provide) {
      const queue = new BullQueue<T, unknown, string, T, unknown, string>(name, { connection, prefix });
      const lastError = lastErrorOf(queue);
      const engine = new BullEngine<T>(
        name,
        queue,
        // drainDelay: a blocking fetch returns within 1 s, so a closing consumer is not held 5 s.
        () =>
          new BullWorker<T>(name, null, {
            connection,
            prefix,
            autorun: false,
            lockDuration: lockMs,
            stalledInterval: lockMs,
            maxStalledCount: maxStalls,
            drainDelay: 1,
          }),
        redis,
      );
      /** The queue's Redis client: its status says, at the teardown, whether Redis is there to answer. */
      let client: { readonly status: string } | null = null;
      try {
        yield* whenReady(queue, `useBullQueue(${name})`, redis.describe, connectTimeoutMs, lastError);
        client = (yield* until(clientOf(queue))) as unknown as { readonly status: string };
        yield* spawn(function* extendLocks() {
          for (;;) {
            yield* sleep(lockMs / 2);
            // A round Redis does not answer is left behind (its replies still land): the next one
            // starts on time, so one stuck call never stops the extensions.
            yield* race([until(engine.extendLocks(lockMs)), sleep(lockMs / 2)]);
          }
        });
        const base = queueOver(engine);
        yield* provide({
          ...base,
          add(data, addOptions) {
            try {
              if (JSON.stringify(data) === undefined) throw new TypeError("undefined");
            } catch {
              throw invalidType(`queue(${name}).add(data)`, "a payload BullMQ can store as JSON", data);
            }
            // Bounded by the engine (`callTimeoutMs`), as `counts` and `deadLetters` are.
            return base.add(data, addOptions);
          },
          obliterate: () => engine.obliterate(),
          cancelJob: (id, reason) => engine.cancelJob(id, reason),
        });
      } finally {
        // Bounded, whatever Redis does: a close that gets no answer is cut to a disconnect, at
        // once when the queue's client is not connected or a worker's close already went
        // unanswered (Redis is gone or paused). BullMQ's close of a connection still being made
        // disconnects it (no wait for Redis).
        const answering = client?.status === "ready" && !engine.closeUnanswered();
        yield* closeWithin(
          answering ? CLOSE_CAP_MS : 0,
          () => Promise.all([engine.closeNow(), queue.close()]),
          () => Promise.all([engine.disconnect(), queue.disconnect()]),
        );
      }
    },
    { name: `bullmq ${name}` },
  );
}

/**
 * How long the queue's own teardown waits for Redis to answer before it disconnects (nothing when
 * its client is not connected, or a worker's close already went unanswered).
 */
const CLOSE_CAP_MS = 1_000;

/** `close()` raced against `capMs`, then `disconnect()` (local, not waited for); neither fails the teardown. */
function* closeWithin(
  capMs: number,
  close: () => Promise<unknown>,
  disconnect: () => Promise<unknown>,
): Generator<unknown, void, unknown> {
  // Started in every case, waited for only within the cap: BullMQ's close of a connection still
  // being made (Redis down at start) disconnects it at once, and only the close does that (its
  // disconnect waits for a client that never connects, whose reconnect timer would then keep the
  // process alive).
  const closing = close().catch(() => {});
  const closed =
    capMs > 0 &&
    (yield* race([
      function* graceful() {
        yield* until(closing);
        return true;
      },
      function* cap() {
        yield* sleep(capMs);
        return false;
      },
    ]));
  // Not waited for either: for a client that did connect and no longer answers, this ends it.
  if (!closed) void disconnect().catch(() => {});
}

/**
 * A queue on Redis: a {@link Queue} plus `obliterate()`, which removes every key of the queue
 * (tests), and `cancelJob(id, reason?)`, the cancellation of a job this process holds (running,
 * or fetched and about to start): its Keel task gets `Cancelled`, its cleanup runs, and the job is
 * dead-lettered as `rejected` with a `JobCancelledError` (a deliberate stop is not retried).
 * Returns false when this process holds no such job (it does not cross processes).
 *
 * @example
 * ```ts
 * import type { BullQueueHandle } from "@keel/worker/bullmq";
 * const describe = (q: BullQueueHandle<string>) => `bullmq queue ${q.name}`;
 * console.log(typeof describe); // function
 * ```
 */
export interface BullQueueHandle<T> extends Queue<T> {
  obliterate(): Operation<void>;
  cancelJob(id: string, reason?: string): boolean;
}

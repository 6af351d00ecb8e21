/**
 * `@keel/worker/bullmq`: the BullMQ 6 engine, for jobs that survive a restart and are shared by
 * worker processes on several machines. `bullmq` and a Redis client (`ioredis`) are optional peers.
 * @module @keel/worker/bullmq
 */
import { type Operation, resource, sleep, spawn, until, useClock } from "@keel/core";
import { Queue as BullQueue, Worker as BullWorker, type ConnectionOptions } from "bullmq";
import { checkKeys, checkObject, invalidType } from "../checks.js";
import { type Queue, queueOver } from "../queue.js";
import { BullEngine, type StoredJob } from "./engine.js";

/** BullMQ's lock on an active job; this process extends it at half that period while it holds the job. */
const LOCK_MS = 30_000;

/**
 * Opens a queue on Redis through BullMQ 6, closed when the caller's scope ends. Jobs, their attempt
 * history and their deadlines live in Redis; `useWorker` over it runs them in this process.
 *
 * **Time**: deadlines are absolute instants of the runtime's clock (the real clock: epoch
 * milliseconds), so the machines sharing a queue need agreeing clocks; delays are Redis-side.
 *
 * @example
 * ```ts
 * import { createConnection } from "node:net";
 * import { run } from "@keel/core";
 * import { useBullQueue } from "@keel/worker/bullmq";
 * const up = await new Promise<boolean>((resolve) => {
 *   const probe = createConnection(6379, "127.0.0.1");
 *   probe.on("connect", () => { probe.destroy(); resolve(true); });
 *   probe.on("error", () => resolve(false));
 * });
 * if (up) {
 *   const counts = await run(function* () {
 *     const queue = yield* useBullQueue<string>({ name: "mail", connection: { host: "127.0.0.1", port: 6379 }, prefix: `doc-${Date.now()}` });
 *     yield* queue.add("hello", { id: "m1" });
 *     const c = yield* queue.counts();
 *     yield* queue.obliterate();
 *     return c;
 *   });
 *   console.log(counts.waiting); // 1
 * }
 * ```
 * @throws `TypeError` for a missing `name` or `connection`.
 */
export function useBullQueue<T>(options: {
  name: string;
  connection: ConnectionOptions;
  prefix?: string;
}): Operation<BullQueueHandle<T>> {
  const o = checkObject("useBullQueue(options)", options);
  checkKeys("useBullQueue(options)", o, ["name", "connection", "prefix"]);
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
  return resource<BullQueueHandle<T>>(
    function* bullQueue(provide) {
      const clock = yield* useClock();
      const queue = new BullQueue<StoredJob<T>>(name, { connection, prefix });
      const engine = new BullEngine<T>(
        name,
        queue,
        // drainDelay: a blocking fetch returns within 1 s, so a closing consumer is not held 5 s.
        () =>
          new BullWorker<StoredJob<T>>(name, null, {
            connection,
            prefix,
            autorun: false,
            lockDuration: LOCK_MS,
            drainDelay: 1,
          }),
        () => clock.now(),
      );
      try {
        yield* until(queue.waitUntilReady());
        yield* spawn(function* extendLocks() {
          for (;;) {
            yield* sleep(LOCK_MS / 2);
            yield* until(engine.extendLocks(LOCK_MS));
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
            return base.add(data, addOptions);
          },
          obliterate: () => until(queue.obliterate({ force: true })),
        });
      } finally {
        yield* until(engine.closeNow().catch(() => {}));
        yield* until(queue.close().catch(() => {}));
      }
    },
    { name: `bullmq ${name}` },
  );
}

/**
 * A queue on Redis: a {@link Queue} plus `obliterate()`, which removes every key of the queue (tests).
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
}

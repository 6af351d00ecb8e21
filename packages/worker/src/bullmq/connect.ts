/**
 * Redis that does not answer: a bounded wait for BullMQ's connections, and the typed error that
 * says which Redis and what to do, instead of a hang and an endless stream of reconnect errors.
 * @module
 */
import { isCancelled, KeelError, type Operation, timeout, until } from "@keel/core";
import { Bound } from "../op.js";

/**
 * Redis did not answer within `connectTimeoutMs`: at `useBullQueue` (the queue's connection) or at
 * a worker's first take (its own connections). The message names the Redis and what to do; `cause`
 * is the last connection error (`ECONNREFUSED`, an authentication error), when there was one.
 *
 * @example
 * ```ts
 * import { isRedisUnavailableError, RedisUnavailableError } from "@keel/worker/bullmq";
 * const e = new RedisUnavailableError("useBullQueue(mail)", "127.0.0.1:6379", 5000);
 * console.log(isRedisUnavailableError(e), e.code); // true KEEL_REDIS_UNAVAILABLE
 * ```
 */
export class RedisUnavailableError extends KeelError {
  /** The engine cannot work at all: a worker fails with it at once (not an outage to wait out). */
  readonly fatal = true;
  constructor(
    where: string,
    readonly redis: string,
    readonly waitedMs: number,
    options?: { cause?: unknown },
  ) {
    const last = options?.cause === undefined ? "" : ` (${describeCause(options.cause)})`;
    super(
      "KEEL_REDIS_UNAVAILABLE",
      `${where}: no answer from Redis at ${redis} within ${waitedMs} ms${last}; start Redis there, ` +
        "or give useBullQueue the right { connection } (or a longer { connectTimeoutMs } if it is only slow to start)",
      options,
    );
    this.name = "RedisUnavailableError";
  }
}

/**
 * True for a {@link RedisUnavailableError}, across duplicate package copies.
 *
 * @example
 * ```ts
 * import { isRedisUnavailableError } from "@keel/worker/bullmq";
 * console.log(isRedisUnavailableError(new Error("ECONNREFUSED"))); // false
 * ```
 */
export function isRedisUnavailableError(e: unknown): e is RedisUnavailableError {
  return (e as { code?: unknown } | null)?.code === "KEEL_REDIS_UNAVAILABLE";
}

/**
 * A package `@keel/worker/bullmq` needs is not installed: `ioredis`, which BullMQ 6 loads (an
 * optional peer of it) to connect to Redis from connection options. The message names the package
 * and the command that installs it; `cause` is BullMQ's own error.
 *
 * @example
 * ```ts
 * import { MissingPackageError } from "@keel/worker/bullmq";
 * const e = new MissingPackageError("useBullQueue(mail)", "ioredis");
 * console.log(e.code, e.packageName); // KEEL_MISSING_PACKAGE ioredis
 * ```
 */
export class MissingPackageError extends KeelError {
  /** Nothing to wait out: a worker fails with it at once. */
  readonly fatal = true;
  constructor(
    where: string,
    readonly packageName: string,
    options?: { cause?: unknown },
  ) {
    super(
      "KEEL_MISSING_PACKAGE",
      `${where}: the package ${packageName} is not installed; BullMQ needs it to connect to Redis: ` +
        `npm install ${packageName}`,
      options,
    );
    this.name = "MissingPackageError";
  }
}

/** Whether `e` is BullMQ's (or Node's) error for an `ioredis` that cannot be loaded. */
export function missingIoredis(e: unknown): boolean {
  const message = e instanceof Error ? e.message : "";
  const code = (e as { code?: unknown } | null)?.code;
  return (
    /could not load the optional 'ioredis' package/.test(message) ||
    ((code === "MODULE_NOT_FOUND" || code === "ERR_MODULE_NOT_FOUND") && /'ioredis'|"ioredis"/.test(message))
  );
}

function describeCause(cause: unknown): string {
  return cause instanceof Error ? cause.message : String(cause);
}

/** Where a connection goes, for messages: `host:port`, a socket path, or what a given client says. */
export function describeRedis(connection: unknown): string {
  const c = connection as { options?: unknown; host?: unknown; port?: unknown; path?: unknown };
  // An ioredis client keeps what it was made with in `options`.
  const o = (typeof c.options === "object" && c.options !== null ? c.options : c) as typeof c;
  if (typeof o.path === "string") return o.path;
  return `${typeof o.host === "string" ? o.host : "localhost"}:${typeof o.port === "number" ? o.port : 6379}`;
}

/** Something BullMQ made that connects: a `Queue` or a `Worker`. */
export interface Connecting {
  waitUntilReady(): Promise<unknown>;
  on(event: "error", listener: (error: unknown) => void): unknown;
}

/**
 * Listens for `client`'s connection errors (BullMQ prints each one when nobody listens: a Redis
 * that is down would print one per reconnect, forever) and keeps the last, for the error's cause.
 */
export function lastErrorOf(client: Connecting): () => unknown {
  let last: unknown;
  client.on("error", (error) => {
    last = error;
  });
  return () => last;
}

/** Waits until `client` is connected, for at most `ms`; throws a `RedisUnavailableError` after that. */
export function whenReady(
  client: Connecting,
  where: string,
  redis: string,
  ms: number,
  lastError: () => unknown,
): Operation<void> {
  return new Bound(waitReady, client, { where, redis, ms }, lastError);
}

function* waitReady(
  client: Connecting,
  at: { where: string; redis: string; ms: number },
  lastError: () => unknown,
): Generator<unknown, void, unknown> {
  try {
    yield* timeout(at.ms, until(client.waitUntilReady()), { label: `${at.where}: connecting to Redis` });
  } catch (e) {
    if (isCancelled(e)) throw e;
    const cause = lastError() ?? e;
    if (missingIoredis(cause) || missingIoredis(e))
      throw new MissingPackageError(at.where, "ioredis", { cause });
    throw new RedisUnavailableError(at.where, at.redis, at.ms, { cause });
  }
}

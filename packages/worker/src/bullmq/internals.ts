/**
 * The BullMQ internals the engine reaches, for BullMQ 5 and 6 alike: where the Redis client and a
 * job's scripts live moved between the two majors (5: `client` and `job.scripts`; 6: `backend.client`
 * and `job.backend`). Each is looked up where it is, never by version number; a BullMQ that has
 * neither fails with an error naming what was missing, not with `undefined is not a function`.
 * @module
 */
import type { Job as BullJob } from "bullmq";

/** What the engine uses of an ioredis client: `eval` (the merge of Keel's fields, see stored.ts). */
export interface RedisLike {
  eval(script: string, keys: number, ...args: (string | number)[]): Promise<unknown>;
}

/** A BullMQ `Queue` or `Worker`: its Redis client, 6's `backend.client` or 5's `client`. */
export function clientOf(owner: object): Promise<RedisLike> {
  const o = owner as { backend?: { client?: Promise<RedisLike> }; client?: Promise<RedisLike> };
  const client = o.backend?.client ?? o.client;
  if (!client) throw unsupported("a Queue's or Worker's Redis client (backend.client or client)");
  return client;
}

/** BullMQ's `moveToDelayed` script call, the one its own retry makes (6: `job.backend`, 5: `job.scripts`). */
interface Scripts {
  moveToDelayed(
    id: string,
    timestamp: number,
    delay: number,
    token: string,
    opts: { skipAttempt?: boolean; fieldsToUpdate?: Record<string, unknown>; fetchNext?: boolean },
  ): Promise<unknown>;
}

function scriptsOf(job: BullJob): Scripts {
  const j = job as unknown as { backend?: Partial<Scripts>; scripts?: Partial<Scripts> };
  const scripts = typeof j.backend?.moveToDelayed === "function" ? j.backend : j.scripts;
  if (typeof scripts?.moveToDelayed !== "function") throw unsupported("a job's moveToDelayed script");
  return scripts as Scripts;
}

/**
 * Moves an active job to delayed for `delayMs` as BullMQ's own retry does: its `attemptsMade` counts
 * the attempt (the public `job.moveToDelayed` does not: it is for a job put off, not failed), and
 * its `failedReason` and `stacktrace` say why, as bull-board shows a job retried by BullMQ.
 */
export function retryLater(
  job: BullJob,
  token: string,
  delayMs: number,
  failure: { failedReason: string; stacktrace: string },
): Promise<unknown> {
  return scriptsOf(job).moveToDelayed(job.id ?? "", Date.now(), delayMs, token, {
    skipAttempt: false,
    fieldsToUpdate: failure,
    fetchNext: false,
  });
}

function unsupported(what: string): Error {
  return new Error(
    `@keel/worker/bullmq: this BullMQ has no ${what}; @keel/worker supports bullmq 5 and 6 (see its peerDependencies)`,
  );
}

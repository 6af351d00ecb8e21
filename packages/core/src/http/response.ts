/**
 * `HttpResponse`: status and headers, with body reads that are operations.
 * @module
 */

import { taskOf } from "../kernel/current.js";
import { type NotAPromise, notAPromise } from "../kernel/not-a-promise.js";
import { CURRENT_TASK, type Operation, suspension } from "../kernel/operation.js";
import type { TaskImpl } from "../kernel/task.js";
import { timeoutScope } from "../time/timeout.js";
import { BodyReleasedError, HttpResponseTooLargeError, HttpTimeoutError } from "./errors.js";
import type { Exchange } from "./exchange-state.js";

/**
 * A response whose body is read with operations, inside the scope that made the request.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createHttpClient, type HttpResponse } from "@keel/core/http";
 * import { createServer } from "node:http";
 * const server = createServer((_, res) => {
 *   res.setHeader("content-type", "text/csv");
 *   res.end("id,total\n7,42\n8,19\n");
 * });
 * server.listen(0, "127.0.0.1");
 * await new Promise((r) => server.once("listening", r));
 * const { port } = server.address() as { port: number };
 * // A body is read with operations, chunk by chunk or whole (`text()`, `json()`, `bytes()`).
 * function* countBytes(res: HttpResponse) {
 *   const reader = res.chunks();
 *   let bytes = 0;
 *   for (let r = yield* reader.next(); !r.done; r = yield* reader.next()) bytes += r.value.byteLength;
 *   return bytes;
 * }
 * const summary = await run(function* () {
 *   const client = yield* createHttpClient({ baseUrl: `http://127.0.0.1:${port}` });
 *   const res = yield* client.get("/report.csv");
 *   return `${res.status} ${res.headers["content-type"]} ${yield* countBytes(res)} bytes`;
 * });
 * console.log(summary); // 200 text/csv 19 bytes
 * server.close();
 * ```
 */
export interface HttpResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[]>>;
  /** The whole body, parsed as JSON (a `SyntaxError` passes through unwrapped). */
  json<T = unknown>(): Operation<T> & NotAPromise;
  text(): Operation<string> & NotAPromise;
  bytes(): Operation<Uint8Array>;
  /** Reads the body chunk by chunk: `for (let r = yield* reader.next(); !r.done; r = yield* reader.next())`. */
  chunks(): { next(): Operation<IteratorResult<Uint8Array, undefined>> };
}

/** Limits that apply to body reads: the gap between chunks and the request's total deadline. */
export interface BodyLimits {
  readonly label: string;
  readonly method: string;
  readonly url: string;
  readonly startedAt: number;
  readonly bodyIdleMs: number;
  readonly totalDeadline: number;
  readonly totalMs: number;
  /** The largest body read whole (`text`, `bytes`, `json`). */
  readonly maxBytes: number;
}

export function tooLarge(label: string, limitBytes: number, bytes: number, announced: boolean) {
  return new HttpResponseTooLargeError({ label, limitBytes, bytes, announced });
}

/** The error for a body whose `content-length` is over `limit`, before a byte of it is read. */
export function announcedTooLarge(ex: Exchange, limit: number): HttpResponseTooLargeError | null {
  if (limit === Infinity) return null;
  const declared = ex.headers["content-length"];
  const n = typeof declared === "string" ? Number(declared) : Number.NaN;
  return n > limit ? tooLarge(ex.plan.label, limit, n, true) : null;
}

export class HttpResponseImpl implements HttpResponse {
  private released = false;
  private endReported = false;
  private offExit: (() => void) | null = null;
  private pending: Buffer[] = [];
  private get readLabel(): string {
    return `${this.limits.label}: read body`;
  }

  constructor(
    private readonly ex: Exchange,
    private readonly limits: BodyLimits,
  ) {}

  get status(): number {
    return this.ex.status;
  }

  get headers(): Readonly<Record<string, string | string[]>> {
    return this.ex.headers;
  }

  /** True once the whole body has arrived and been handed out. */
  get consumed(): boolean {
    return this.ex.stage === "done" && this.pending.length === 0 && this.ex.chunks.length === 0;
  }

  /**
   * The owning scope ended: an unread body is discarded and its socket destroyed (never pooled
   * half-read); later reads fail at once with `KEEL_BODY_RELEASED`.
   */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.offExit?.();
    this.offExit = null;
    if (!this.consumed) this.ex.abort(new BodyReleasedError(this.limits.label));
  }

  /** `off` unregisters this body's scope-exit cleanup; called once the body has been read whole. */
  onConsumed(off: () => void): void {
    this.offExit = off;
  }

  /** The next chunk, or null at the end; any failure or cancellation discards the body. */
  read(): Operation<Buffer | null> & NotAPromise {
    const self = this;
    return notAPromise(
      {
        *[Symbol.iterator]() {
          const task = taskOf(yield CURRENT_TASK, self.readLabel);
          return yield* self.nextChunk(task);
        },
      },
      "response.read()",
    );
  }

  /**
   * The reading step shared by every body read: waits (bounded by the idle gap and the total
   * budget) until a chunk or the end is there, then hands out one chunk, or null at the end.
   */
  private *nextChunk(task: TaskImpl<unknown>): Generator<unknown, Buffer | null, unknown> {
    if (this.released) throw new BodyReleasedError(this.limits.label);
    task.checkpoint();
    try {
      if (this.pending.length === 0 && this.ex.chunks.length === 0 && this.ex.stage === "body") {
        this.ex.resumeReading();
        yield* this.bounded(this.waitForData());
      }
    } catch (e) {
      this.release();
      if (e instanceof HttpTimeoutError && e.label === this.limits.label) {
        const { method, url } = this.limits;
        task.emit({ type: "http:timeout", method, url, phase: e.phase, timeoutMs: e.timeoutMs });
      }
      throw e;
    }
    if (this.pending.length === 0) this.pending = this.ex.take();
    const next = this.pending.shift();
    if (next) return next;
    if (this.ex.stage === "failed") {
      this.release();
      throw this.ex.error;
    }
    if (!this.endReported) {
      this.endReported = true;
      // Read whole: the socket is back in the pool and the scope no longer needs a cleanup.
      this.offExit?.();
      this.offExit = null;
      const { method, url, startedAt } = this.limits;
      task.emit({
        type: "http:body",
        method,
        url,
        bytes: this.ex.receivedBytes,
        elapsedMs: task.clock.now() - startedAt,
      });
    }
    return null;
  }

  /**
   * The whole body, read in one loop (no operation per chunk: this is every `text()` and `json()`),
   * up to `maxBytes`: past it the body is released (its socket destroyed) and the read throws.
   */
  private *readAll(): Generator<unknown, Buffer, unknown> {
    const task = taskOf(yield CURRENT_TASK, this.readLabel);
    const { maxBytes, label } = this.limits;
    const announced = this.released ? null : announcedTooLarge(this.ex, maxBytes);
    if (announced) {
      this.release();
      throw announced;
    }
    const parts: Buffer[] = [];
    let size = 0;
    for (let c = yield* this.nextChunk(task); c !== null; c = yield* this.nextChunk(task)) {
      size += c.length;
      if (size > maxBytes) {
        this.release();
        throw tooLarge(label, maxBytes, size, false);
      }
      parts.push(c);
    }
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  }

  private waitForData(): Operation<void> {
    return suspension(this.ex.wait("body"));
  }

  private bounded(op: Operation<void>): Operation<void> {
    const { label, bodyIdleMs, totalDeadline, totalMs, startedAt } = this.limits;
    let inner = op;
    // The idle limit is the longest gap *between* chunks (conformance 116(d)): the wait for the
    // first chunk after the headers is bounded by the total budget and the deadline. Counting it
    // too would make a first chunk due exactly at the limit lose, by the inclusive-deadline rule.
    if (bodyIdleMs !== Infinity && this.ex.receivedBytes > 0) {
      inner = timeoutScope(inner, `${label} body idle`, (t) => t + bodyIdleMs, {
        make: (i) => new HttpTimeoutError({ ...i, timeoutMs: bodyIdleMs, phase: "body", label }),
      });
    }
    if (totalDeadline !== Infinity) {
      inner = timeoutScope(inner, `${label} total`, () => totalDeadline, {
        make: (i) =>
          new HttpTimeoutError({
            ...i,
            elapsedMs: i.deadline - startedAt,
            timeoutMs: totalMs,
            phase: "total",
            label,
          }),
      });
    }
    return inner;
  }

  bytes(): Operation<Uint8Array> & NotAPromise {
    return notAPromise({ [Symbol.iterator]: () => this.readAll() }, "response.bytes()");
  }

  text(): Operation<string> & NotAPromise {
    const self = this;
    return notAPromise(
      {
        *[Symbol.iterator]() {
          return (yield* self.readAll()).toString("utf8");
        },
      },
      "response.text()",
    );
  }

  json<T = unknown>(): Operation<T> & NotAPromise {
    const self = this;
    return notAPromise(
      {
        *[Symbol.iterator]() {
          return JSON.parse((yield* self.readAll()).toString("utf8")) as T;
        },
      },
      "response.json()",
    );
  }

  chunks(): { next(): Operation<IteratorResult<Uint8Array, undefined>> } {
    const self = this;
    return {
      next() {
        return notAPromise(
          {
            *[Symbol.iterator](): Generator<unknown, IteratorResult<Uint8Array, undefined>, unknown> {
              const c = yield* self.read();
              return c === null ? { done: true, value: undefined } : { done: false, value: c };
            },
          },
          "response.chunks().next()",
        );
      },
    };
  }
}

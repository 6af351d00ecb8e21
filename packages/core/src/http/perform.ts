/**
 * Performing one request: attempts with phased timeouts, inside retry, inside the total budget.
 * @module
 */
import type { Dispatcher } from "undici";
import { isCancelled } from "../kernel/cancelled.js";
import type { Clock } from "../kernel/clock.js";
import { currentTask } from "../kernel/current.js";
import type { Frame } from "../kernel/frame.js";
import type { Operation, Suspension } from "../kernel/operation.js";
import type { TaskImpl } from "../kernel/task.js";
import { type AttemptInfo, type RetryPolicy, retry } from "../resilience/retry.js";
import { isTransient } from "../resilience/transient.js";
import { timeoutScope } from "../time/timeout.js";
import type { HttpTimeouts } from "./client.js";
import { type ConnectionBook, originKey } from "./connections.js";
import { HttpError, type HttpPhase, HttpTimeoutError } from "./errors.js";
import { Exchange, waitOnExchange } from "./exchange.js";
import { HttpResponseImpl } from "./response.js";
import { parseRetryAfter } from "./retry-after.js";

/** Everything a request needs, validated when the request was made. */
export interface RequestPlan {
  readonly agent: Dispatcher;
  readonly connections: ConnectionBook;
  readonly clock: Clock;
  readonly url: URL;
  /** `url.href`, serialised once. */
  readonly href: string;
  readonly method: string;
  readonly headers: Record<string, string>;
  readonly body: string | Uint8Array | null;
  readonly keepAlive: boolean;
  readonly timeouts: Required<HttpTimeouts>;
  readonly retry: RetryPolicy | false;
  /** GET/PUT/DELETE…, or any method with an idempotency key: safe to send twice. */
  readonly idempotent: boolean;
  readonly expect: (status: number) => boolean;
  readonly deadlineHeader: string | false;
  /** `response`: hand the response to the caller; `json`: read and parse it within the attempt. */
  readonly mode: "response" | "json";
}

const EXCERPT_BYTES = 2048;
/** Failures of attempts that never reached a socket: safe to retry for any method. */
const neverSent = new WeakSet<object>();

export function performRequest(plan: RequestPlan): Operation<unknown> {
  const label = `${plan.method} ${plan.url.pathname}${plan.url.search}`;
  return {
    *[Symbol.iterator]() {
      const task = yield* currentTask(label);
      task.checkpoint();
      // The response body belongs to the scope that made the request (not to retry's or total's).
      const owner = task.top;
      const totalMs = plan.timeouts.totalMs;
      const totalDeadline = totalMs === Infinity ? Infinity : plan.clock.now() + totalMs;
      let op: Operation<unknown> = {
        [Symbol.iterator]: () => attempt(plan, task, owner, label, totalDeadline),
      };
      if (plan.retry !== false) {
        const policy = plan.retry;
        const retryOn = (error: unknown, info: AttemptInfo) =>
          (policy.retryOn ?? isTransient)(error, info) && (plan.idempotent || neverSent.has(error as object));
        const attemptOp = op;
        const namedAttempt = Object.defineProperty(() => attemptOp, "name", { value: label });
        op = retry(namedAttempt, { attempts: 3, ...policy, retryOn });
      }
      if (totalDeadline !== Infinity)
        op = phase(task, plan, "total", totalMs, label, op, () => totalDeadline);
      return yield* op;
    },
  };
}

function* attempt(
  plan: RequestPlan,
  task: TaskImpl<unknown>,
  owner: Frame,
  label: string,
  totalDeadline: number,
): Generator<unknown, unknown, unknown> {
  const { clock, url, method, timeouts } = plan;
  const headers = { ...plan.headers };
  if (plan.deadlineHeader) {
    const left = task.effectiveDeadline() - clock.now();
    if (left !== Infinity) headers[plan.deadlineHeader.toLowerCase()] = String(Math.max(0, Math.floor(left)));
  }
  const ex = new Exchange({
    dispatcher: plan.agent,
    origin: url.origin,
    path: `${url.pathname}${url.search}`,
    method,
    headers,
    body: plan.body,
    reset: !plan.keepAlive,
    clock,
    holdKey: originKey(url.hostname, url.port, url.protocol),
    connections: plan.connections,
    // getJson reads the body at once; a response handed over keeps it on the socket until read.
    holdBody: plan.mode === "response",
  });
  if (task.effectiveDeadline() <= clock.now()) {
    // Spent, but its timer has not fired yet (blocking work ran past it): wait here for it, so the
    // cancellation lands before any socket is opened.
    yield* sleepUntil(task, task.effectiveDeadline(), `${label}: deadline spent`);
  }
  const startedAt = clock.now();
  // Per-phase events are built only for a listener: this is every request's path.
  const listening = task.runtime.listening;
  const href = plan.href;
  if (listening) task.emit({ type: "http:request", method, url: href });
  let res: HttpResponseImpl | null = null;
  let handedOver = false;
  try {
    ex.start();
    yield* phase(
      task,
      plan,
      "connect",
      timeouts.connectMs,
      label,
      waitOnExchange(
        ex,
        () => ex.stage !== "connecting",
        () => `${label}: connecting`,
      ),
    );
    if (listening && ex.stage !== "failed") {
      task.emit({ type: "http:connect", method, url: href, elapsedMs: clock.now() - startedAt });
    }
    yield* phase(
      task,
      plan,
      "headers",
      timeouts.headersMs,
      label,
      waitOnExchange(
        ex,
        () => ex.stage !== "waiting-headers",
        () => `${label}: waiting for headers`,
      ),
    );
    if (ex.stage === "failed") throw ex.error;
    if (listening) {
      task.emit({
        type: "http:headers",
        method,
        url: href,
        status: ex.status,
        elapsedMs: clock.now() - startedAt,
      });
    }
    res = new HttpResponseImpl(ex, {
      label,
      method,
      url: href,
      startedAt,
      bodyIdleMs: timeouts.bodyIdleMs,
      totalDeadline,
      totalMs: timeouts.totalMs,
      insideTotal: plan.mode === "json",
    });
    if (
      plan.mode === "json" &&
      (ex.status === 204 || ex.headers["content-length"] === "0") &&
      plan.expect(ex.status)
    ) {
      yield* res.bytes();
      return undefined;
    }
    if (!plan.expect(ex.status)) {
      const bodyExcerpt = yield* res.excerpt(EXCERPT_BYTES);
      const retryAfterMs = parseRetryAfter(ex.headers["retry-after"], clock.now());
      throw new HttpError({
        method,
        url: href,
        status: ex.status,
        headers: ex.headers,
        bodyExcerpt,
        ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
        // A POST that reached the server is not safe to send again, whatever its status says.
        retryable: plan.idempotent ? undefined : false,
      });
    }
    if (plan.mode === "json") return yield* res.json();
    const response = res;
    response.onConsumed(owner.onExit(() => response.release()));
    handedOver = true;
    return res;
  } catch (e) {
    if (!ex.written && !isCancelled(e) && typeof e === "object" && e !== null) neverSent.add(e);
    throw e;
  } finally {
    if (!handedOver) {
      if (res) res.release();
      else ex.abort(new Error(`${label}: the attempt ended before a response`));
    }
  }
}

function phase<T>(
  task: TaskImpl<unknown>,
  plan: RequestPlan,
  name: HttpPhase,
  ms: number,
  label: string,
  op: Operation<T>,
  deadline?: () => number,
): Operation<T> {
  if (ms === Infinity) return op;
  // The scope's own error is made exactly when this phase timed out: report it there.
  return timeoutScope(op, `${label} ${name}`, deadline ?? ((t) => t + ms), {
    make: (i) => {
      task.emit({ type: "http:timeout", method: plan.method, url: plan.href, phase: name, timeoutMs: ms });
      return new HttpTimeoutError({ ...i, timeoutMs: ms, phase: name, label });
    },
  });
}

function sleepUntil(task: TaskImpl<unknown>, at: number, description: string): Operation<void> {
  return {
    *[Symbol.iterator]() {
      yield {
        kind: "suspend",
        description,
        interruptible: "normal",
        enter: (resolve) => task.clock.schedule(at, () => resolve({ ok: true, value: undefined })),
      } satisfies Suspension<void>;
    },
  };
}

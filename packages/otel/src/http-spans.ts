/**
 * HTTP client spans: one per attempt (kind `CLIENT`), with a child span per phase, and the request
 * duration metric.
 *
 * With undici's own OpenTelemetry instrumentation registered (something subscribes to
 * `undici:request:create`), Keel steps aside (`"auto"`): the instrumentation makes the one client
 * span, writes the one `traceparent` and records the duration metric; Keel makes it parent that
 * span where its own would have been (see spans.ts), and records neither.
 *
 * Invariant: HTTP spans are never parents. They sit in `requests`, found again by root, method and
 * URL, because a response's body may be read by another task than the one that sent the request.
 * @module
 */
import { channel } from "node:diagnostics_channel";
import {
  type Context,
  context,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapPropagator,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { addDeadlineLeft, fail } from "./common.js";
import { httpAttributes, httpErrorType } from "./http-attributes.js";
import type { KeelMetrics } from "./metrics.js";
import { injectTraceContext } from "./propagation.js";

interface Request {
  readonly span: Span;
  readonly taskId: number;
  readonly method: string;
  readonly url: string;
  readonly startedAt: number;
  phaseAt: number;
  status: number | null;
}

/** What an HTTP event says about the request it belongs to. */
interface RequestRef {
  readonly rootId: number;
  readonly method: string;
  readonly url: string;
  readonly taskId: number;
}

/** Who makes an HTTP request's client span (see `InstrumentOptions.httpClientSpans`). */
export type HttpSpansMode = "auto" | "keel" | "undici";

/** Where undici publishes each request as it is created (what its instrumentation subscribes to). */
const undiciCreate = channel("undici:request:create");

export class HttpSpans {
  private readonly requests = new Map<string, Request[]>();

  constructor(
    private readonly tracer: Tracer,
    private readonly metrics: KeelMetrics,
    private readonly propagator: TextMapPropagator | null,
    private readonly mode: HttpSpansMode,
  ) {}

  /** Whether undici's instrumentation makes this request's span (asked per request: it may come later). */
  stepsAside(): boolean {
    return this.mode === "undici" || (this.mode === "auto" && undiciCreate.hasSubscribers);
  }

  /** An attempt starts under `parent`; its trace context goes into the request's headers. */
  request(
    parent: Context,
    e: RequestRef & { setHeader: (name: string, value: string) => void; deadlineLeftMs?: number },
  ): void {
    const attributes = addDeadlineLeft(httpAttributes(e.method, e.url, true), e.deadlineLeftMs);
    const span = this.tracer.startSpan(e.method, { kind: SpanKind.CLIENT, attributes }, parent);
    injectTraceContext(parent, span, e.setHeader, this.propagator);
    const now = Date.now();
    const key = `${e.rootId} ${e.method} ${e.url}`;
    const list = this.requests.get(key) ?? [];
    list.push({
      span,
      taskId: e.taskId,
      method: e.method,
      url: e.url,
      startedAt: now,
      phaseAt: now,
      status: null,
    });
    this.requests.set(key, list);
  }

  /** A phase ended: a child span from the previous phase's end to now. */
  phase(e: RequestRef, name: "connect" | "headers" | "body", status?: number): void {
    const r = this.find(e, name === "body");
    if (!r) return;
    const now = Date.now();
    const parent = trace.setSpan(context.active(), r.span);
    this.tracer.startSpan(name, { startTime: r.phaseAt }, parent).end(now);
    r.phaseAt = now;
    if (status !== undefined) {
      r.status = status;
      r.span.setAttribute("http.response.status_code", status);
      if (status >= 400) {
        r.span.setAttribute("error.type", String(status));
        r.span.setStatus({ code: SpanStatusCode.ERROR });
      }
    }
    if (name === "body") this.end(r, undefined);
  }

  timeout(e: RequestRef, phase: string, timeoutMs: number): void {
    this.find(e, false)?.span.addEvent("keel.http.timeout", {
      "keel.http.phase": phase,
      "keel.timeout.ms": timeoutMs,
    });
  }

  error(e: RequestRef, error: unknown): void {
    const r = this.find(e, true);
    if (r) this.end(r, error);
  }

  /** A task settled: the requests it sent and never finished end with it. */
  settled(taskId: number): void {
    if (this.requests.size === 0) return;
    for (const [key, list] of this.requests) {
      for (const r of list.filter((x) => x.taskId === taskId)) r.span.end();
      const left = list.filter((x) => x.taskId !== taskId);
      if (left.length === 0) this.requests.delete(key);
      else this.requests.set(key, left);
    }
  }

  private find(e: RequestRef, remove: boolean): Request | undefined {
    // None open (undici's instrumentation makes them, or none was sent): no key to build.
    if (this.requests.size === 0) return undefined;
    const key = `${e.rootId} ${e.method} ${e.url}`;
    const list = this.requests.get(key);
    if (!list) return undefined;
    const i = Math.max(
      0,
      list.findIndex((r) => r.taskId === e.taskId),
    );
    const r = list[i];
    if (remove) {
      list.splice(i, 1);
      if (list.length === 0) this.requests.delete(key);
    }
    return r;
  }

  private end(r: Request, error: unknown): void {
    let errorType: string | null = r.status !== null && r.status >= 400 ? String(r.status) : null;
    if (error !== undefined && errorType === null) {
      errorType = httpErrorType(error);
      r.span.setAttribute("error.type", errorType);
      fail(r.span, error);
    }
    r.span.end();
    this.metrics.recordHttp(r.method, r.url, Date.now() - r.startedAt, r.status, errorType);
  }
}

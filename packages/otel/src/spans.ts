/**
 * Spans from Keel's events: one per task that matters, retry scope and attempt, HTTP request (with
 * its phases) and job, parented by the task tree.
 *
 * Invariants: a task's `stack` holds its open retry, attempt and job spans, innermost last; what the
 * task starts next (a child task, an HTTP request) is parented by the innermost, else by the task's
 * own span, else by what its parent would parent. HTTP spans are never parents: they sit in
 * `requests`, found again by root, method and URL, because a response's body may be read by
 * another task than the one that sent the request.
 * @module
 */
import type { KeelEvent } from "@keel/core";
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
import { httpAttributes, httpErrorType } from "./http-attributes.js";
import type { KeelMetrics } from "./metrics.js";
import { injectTraceContext } from "./propagation.js";

/** Names Keel gives a task whose function has none: such tasks get no span of their own. */
const ANONYMOUS = new Set(["task", "op", "shielded", "keel"]);

interface Scope {
  readonly kind: "retry" | "attempt" | "job";
  readonly span: Span;
  readonly ctx: Context;
  readonly key: string;
}

interface TaskNode {
  /** The task's own span, or null when it gets none (anonymous). */
  readonly span: Span | null;
  /** The context the task's own span (or, without one, its children) hang from. */
  readonly ctx: Context;
  readonly stack: Scope[];
}

interface Request {
  readonly span: Span;
  readonly taskId: number;
  readonly method: string;
  readonly url: string;
  readonly startedAt: number;
  phaseAt: number;
  status: number | null;
}

export class SpanTracker {
  private readonly tasks = new Map<number, TaskNode>();
  private readonly requests = new Map<string, Request[]>();

  constructor(
    private readonly tracer: Tracer,
    private readonly metrics: KeelMetrics,
    private readonly propagator: TextMapPropagator | null,
  ) {}

  handle(e: KeelEvent): void {
    switch (e.type) {
      case "task:start":
        this.start(e.taskId, e.parentId, e.name, e.path, e.rootId);
        return;
      case "task:settle":
        this.settle(e);
        return;
      case "cancel:request": {
        const owner = e.owner === "outside" ? "outside" : (e.owner.label ?? e.owner.kind);
        this.eventOn(e.taskId, "keel.cancel", {
          "keel.cancel.reason": e.reason.kind,
          "keel.cancel.owner": owner,
        });
        this.tasks
          .get(e.taskId)
          ?.span?.setAttributes({ "keel.cancel.reason": e.reason.kind, "keel.cancel.owner": owner });
        return;
      }
      case "timeout:fire":
        this.eventOn(e.taskId, "keel.timeout", {
          "keel.timeout.owner": e.scope.label ?? e.scope.kind,
          "keel.timeout.ms": e.timeoutMs,
        });
        return;
      case "cleanup:overrun":
        this.eventOn(e.taskId, "keel.cleanup.overrun", {
          "keel.cleanup.budget_ms": e.budgetMs,
          "keel.waiting_on": e.waitingOn ?? "",
        });
        return;
      case "cleanup:abandon":
        this.eventOn(e.taskId, "keel.cleanup.abandon", { "keel.waiting_on": e.waitingOn ?? "" });
        return;
      case "shield:delay":
        this.eventOn(e.taskId, "keel.shield.delay", { "keel.shield.delayed_ms": e.delayedMs });
        return;
      case "retry:attempt":
        this.attempt(e.taskId, e.attempt, e.attempts, e.label);
        return;
      case "retry:sleep": {
        this.endScope(e.taskId, "attempt", null, e.error);
        const retry = this.find(e.taskId, "retry", null);
        retry?.span.addEvent("keel.retry", {
          "keel.retry.attempt": e.attempt,
          "keel.retry.delay_ms": e.delayMs,
          "keel.retry.delay_reason": e.delayReason,
        });
        return;
      }
      case "retry:giveup":
        this.endScope(e.taskId, "attempt", null, e.error);
        this.find(e.taskId, "retry", null)?.span.setAttribute("keel.retry.giveup", e.reason);
        this.endScope(e.taskId, "retry", null, e.error);
        return;
      case "retry:success":
        this.endScope(e.taskId, "attempt", null, undefined);
        this.endScope(e.taskId, "retry", null, undefined);
        return;
      case "http:request":
        this.request(e.taskId, e.rootId, e.method, e.url, e.setHeader);
        return;
      case "http:connect":
        this.phase(e, "connect");
        return;
      case "http:headers":
        this.phase(e, "headers", e.status);
        return;
      case "http:body":
        this.phase(e, "body");
        return;
      case "http:timeout":
        this.findRequest(e, false)?.span.addEvent("keel.http.timeout", {
          "keel.http.phase": e.phase,
          "keel.timeout.ms": e.timeoutMs,
        });
        return;
      case "http:error": {
        const r = this.findRequest(e, true);
        if (r) this.endRequest(r, e.error);
        return;
      }
      case "worker:job":
        if (e.transition === "start") {
          const attributes = {
            "keel.job.queue": e.queue,
            "keel.job.id": e.jobId,
            "keel.job.attempt": e.attempt,
          };
          this.open(
            e.taskId,
            "job",
            `job ${e.queue}`,
            `${e.queue}/${e.jobId}`,
            attributes,
            SpanKind.CONSUMER,
          );
          return;
        }
        this.find(e.taskId, "job", `${e.queue}/${e.jobId}`)?.span.setAttribute(
          "keel.job.outcome",
          e.transition,
        );
        this.endScope(
          e.taskId,
          "job",
          `${e.queue}/${e.jobId}`,
          e.transition === "retry" || e.transition === "dead-letter" ? (e.error ?? e.reason) : undefined,
        );
        return;
    }
  }

  private start(id: number, parentId: number | null, name: string, path: string, rootId: number): void {
    // A root's start is published inside `run()`'s call: `context.active()` is the caller's.
    const parentCtx = parentId === null ? context.active() : this.contextFor(parentId);
    if (parentId !== null && ANONYMOUS.has(name)) {
      this.tasks.set(id, { span: null, ctx: parentCtx, stack: [] });
      return;
    }
    const attributes = { "keel.task.path": path, "keel.task.id": id, "keel.root.id": rootId };
    const span = this.tracer.startSpan(name, { attributes }, parentCtx);
    this.tasks.set(id, { span, ctx: trace.setSpan(parentCtx, span), stack: [] });
  }

  private settle(e: Extract<KeelEvent, { type: "task:settle" }>): void {
    const node = this.tasks.get(e.taskId);
    if (!node) return;
    this.tasks.delete(e.taskId);
    for (let i = node.stack.length - 1; i >= 0; i--) node.stack[i]!.span.end();
    for (const [key, list] of this.requests) {
      for (const r of list.filter((x) => x.taskId === e.taskId)) r.span.end();
      const left = list.filter((x) => x.taskId !== e.taskId);
      if (left.length === 0) this.requests.delete(key);
      else this.requests.set(key, left);
    }
    const span = node.span;
    if (!span) return;
    span.setAttribute("keel.task.state", e.state);
    if (e.state === "failed") fail(span, e.error);
    else if (e.state === "cancelled" && e.reason) span.setAttribute("keel.cancel.reason", e.reason.kind);
    span.end();
  }

  /** What a task's next child (or request) is parented by. */
  private contextFor(taskId: number): Context {
    const node = this.tasks.get(taskId);
    if (!node) return context.active();
    return node.stack.length > 0 ? node.stack[node.stack.length - 1]!.ctx : node.ctx;
  }

  private open(
    taskId: number,
    kind: Scope["kind"],
    name: string,
    key: string,
    attributes: Record<string, string | number>,
    spanKind = SpanKind.INTERNAL,
  ): void {
    const node = this.tasks.get(taskId);
    if (!node) return;
    const parent = this.contextFor(taskId);
    const span = this.tracer.startSpan(name, { kind: spanKind, attributes }, parent);
    node.stack.push({ kind, span, ctx: trace.setSpan(parent, span), key });
  }

  private find(taskId: number, kind: Scope["kind"], key: string | null): Scope | undefined {
    const stack = this.tasks.get(taskId)?.stack ?? [];
    for (let i = stack.length - 1; i >= 0; i--)
      if (stack[i]!.kind === kind && (key === null || stack[i]!.key === key)) return stack[i];
    return undefined;
  }

  /** Ends the innermost open scope of `kind` (and anything opened inside it), failed when `error` is given. */
  private endScope(taskId: number, kind: Scope["kind"], key: string | null, error: unknown): void {
    const stack = this.tasks.get(taskId)?.stack;
    const scope = this.find(taskId, kind, key);
    if (!stack || !scope) return;
    while (stack.length > 0) {
      const top = stack.pop()!;
      if (top === scope && error !== undefined) fail(top.span, error);
      top.span.end();
      if (top === scope) return;
    }
  }

  private attempt(taskId: number, attempt: number, attempts: number, label: string): void {
    if (attempt === 1 || !this.find(taskId, "retry", label)) {
      this.open(taskId, "retry", label, label, {
        "keel.retry.label": label,
        "keel.retry.attempts": attempts,
      });
    }
    this.open(taskId, "attempt", `${label} attempt ${attempt}`, label, {
      "keel.retry.attempt": attempt,
      "keel.retry.attempts": attempts,
    });
  }

  private eventOn(taskId: number, name: string, attributes: Record<string, string | number>): void {
    trace.getSpan(this.contextFor(taskId))?.addEvent(name, attributes);
  }

  private request(
    taskId: number,
    rootId: number,
    method: string,
    url: string,
    setHeader: (name: string, value: string) => void,
  ): void {
    const parent = this.contextFor(taskId);
    const span = this.tracer.startSpan(
      method,
      { kind: SpanKind.CLIENT, attributes: httpAttributes(method, url, true) },
      parent,
    );
    injectTraceContext(parent, span, setHeader, this.propagator);
    const now = Date.now();
    const key = `${rootId} ${method} ${url}`;
    const list = this.requests.get(key) ?? [];
    list.push({ span, taskId, method, url, startedAt: now, phaseAt: now, status: null });
    this.requests.set(key, list);
  }

  private findRequest(
    e: { rootId: number; method: string; url: string; taskId: number },
    remove: boolean,
  ): Request | undefined {
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

  /** A phase ended: a child span from the previous phase's end to now. */
  private phase(
    e: { rootId: number; method: string; url: string; taskId: number },
    name: "connect" | "headers" | "body",
    status?: number,
  ): void {
    const r = this.findRequest(e, name === "body");
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
    if (name === "body") this.endRequest(r, undefined);
  }

  private endRequest(r: Request, error: unknown): void {
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

/** Records `error` on `span` and marks it failed. */
function fail(span: Span, error: unknown): void {
  if (error instanceof Error) span.recordException(error);
  const message = error instanceof Error ? error.message : String(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

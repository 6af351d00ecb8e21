/**
 * Spans from Keel's events: one per task that matters, timeout scope, retry and attempt, HTTP
 * request (with its phases, in `http-spans.ts`) and job, parented by the task tree.
 *
 * Invariants: a task's `stack` holds its open timeout, retry, attempt and job spans, innermost
 * last; what the task starts next (a child task, an HTTP request, a scope) is parented by the
 * innermost, else by the task's own span, else by what its parent would parent. A scope's end pops
 * everything opened inside it that is still open (a retry cut by an enclosing timeout ends with it),
 * and a task's settle ends all of its own. A retry's budget timeout and an attempt's own timeout do
 * not get a span of their own: their span is the retry's or the attempt's, which carries
 * `keel.timeout.*`.
 * @module
 */
import type { KeelEvent } from "@keel/core";
import {
  type Context,
  context,
  type Span,
  SpanKind,
  type TextMapPropagator,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { HttpSpans } from "./http-spans.js";
import type { KeelMetrics } from "./metrics.js";
import { deadlineLeft, fail } from "./span-status.js";

/** Names Keel gives a task whose function has none: such tasks get no span of their own. */
const ANONYMOUS = new Set(["task", "op", "shielded", "keel"]);

type Attributes = Record<string, string | number | boolean>;

interface Scope {
  readonly kind: "timeout" | "retry" | "attempt" | "job";
  readonly span: Span;
  readonly ctx: Context;
  /** Found again by: the label (retry, attempt), `queue/id` (job), the scope id (timeout). */
  readonly key: string;
  /** The span's name (an attempt's is also its own timeout's label). */
  readonly name: string;
  /** A retry's budget timeout label, which merges into its span. */
  readonly budgetLabel: string | null;
  /** The id of the timeout scope merged into this span, if any. */
  timeoutId: number | null;
}

interface TaskNode {
  /** The task's own span, or null when it gets none (anonymous). */
  readonly span: Span | null;
  /** The context the task's own span (or, without one, its children) hang from. */
  readonly ctx: Context;
  readonly stack: Scope[];
}

type Of<T extends KeelEvent["type"]> = Extract<KeelEvent, { type: T }>;

export class SpanTracker {
  private readonly tasks = new Map<number, TaskNode>();
  private readonly http: HttpSpans;

  constructor(
    private readonly tracer: Tracer,
    metrics: KeelMetrics,
    propagator: TextMapPropagator | null,
  ) {
    this.http = new HttpSpans(tracer, metrics, propagator);
  }

  handle(e: KeelEvent): void {
    switch (e.type) {
      case "task:start":
        this.start(e);
        return;
      case "task:settle":
        this.settle(e);
        return;
      case "cancel:request": {
        const owner = e.owner === "outside" ? "outside" : (e.owner.label ?? e.owner.kind);
        const attributes = { "keel.cancel.reason": e.reason.kind, "keel.cancel.owner": owner };
        this.eventOn(e.taskId, "keel.cancel", attributes);
        this.tasks.get(e.taskId)?.span?.setAttributes(attributes);
        return;
      }
      case "timeout:start":
        this.timeoutStart(e);
        return;
      case "timeout:fire": {
        const attributes = { "keel.timeout.owner": e.scope.label, "keel.timeout.ms": e.timeoutMs };
        const scope = this.timeoutScope(e.taskId, e.scope.id);
        if (scope) {
          scope.span.setAttribute("keel.timeout.fired", true);
          scope.span.addEvent("keel.timeout", attributes);
        } else this.eventOn(e.taskId, "keel.timeout", attributes);
        return;
      }
      case "timeout:end":
        this.timeoutEnd(e);
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
      case "retry:start":
        this.retryStart(e);
        return;
      case "retry:attempt":
        this.attempt(e);
        return;
      case "retry:sleep":
        this.endScope(e.taskId, this.find(e.taskId, "attempt", null), e.error);
        this.find(e.taskId, "retry", null)?.span.addEvent("keel.retry", {
          "keel.retry.attempt": e.attempt,
          "keel.retry.delay_ms": e.delayMs,
          "keel.retry.delay_reason": e.delayReason,
        });
        return;
      case "retry:giveup":
        this.endScope(e.taskId, this.find(e.taskId, "attempt", null), e.error);
        this.find(e.taskId, "retry", null)?.span.setAttribute("keel.retry.giveup", e.reason);
        return;
      case "retry:success":
        this.endScope(e.taskId, this.find(e.taskId, "attempt", e.label), undefined);
        return;
      case "retry:end": {
        const retry = this.find(e.taskId, "retry", e.label);
        retry?.span.setAttribute("keel.retry.outcome", e.outcome);
        const failed = e.outcome === "giveup" || e.outcome === "failed";
        this.endScope(e.taskId, retry, failed ? e.error : undefined);
        return;
      }
      case "http:request":
        this.http.request(this.contextFor(e.taskId), e);
        return;
      case "http:connect":
        this.http.phase(e, "connect");
        return;
      case "http:headers":
        this.http.phase(e, "headers", e.status);
        return;
      case "http:body":
        this.http.phase(e, "body");
        return;
      case "http:timeout":
        this.http.timeout(e, e.phase, e.timeoutMs);
        return;
      case "http:error":
        this.http.error(e, e.error);
        return;
      case "worker:job":
        this.job(e);
        return;
    }
  }

  private start(e: Of<"task:start">): void {
    // A root's start is published inside `run()`'s call: `context.active()` is the caller's.
    const parentCtx = e.parentId === null ? context.active() : this.contextFor(e.parentId);
    if (e.parentId !== null && ANONYMOUS.has(e.name)) {
      this.tasks.set(e.taskId, { span: null, ctx: parentCtx, stack: [] });
      return;
    }
    const attributes = {
      "keel.task.path": e.path,
      "keel.task.id": e.taskId,
      "keel.root.id": e.rootId,
      ...deadlineLeft(e.deadlineLeftMs),
    };
    const span = this.tracer.startSpan(e.name, { attributes }, parentCtx);
    this.tasks.set(e.taskId, { span, ctx: trace.setSpan(parentCtx, span), stack: [] });
  }

  private settle(e: Of<"task:settle">): void {
    const node = this.tasks.get(e.taskId);
    if (!node) return;
    this.tasks.delete(e.taskId);
    for (let i = node.stack.length - 1; i >= 0; i--) node.stack[i]!.span.end();
    this.http.settled(e.taskId);
    const span = node.span;
    if (!span) return;
    span.setAttribute("keel.task.state", e.state);
    if (e.state === "failed") fail(span, e.error);
    else if (e.state === "cancelled" && e.reason) span.setAttribute("keel.cancel.reason", e.reason.kind);
    span.end();
  }

  /** What a task's next child (or request, or scope) is parented by. */
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
    attributes: Attributes,
    options: { spanKind?: SpanKind; budgetLabel?: string } = {},
  ): void {
    const node = this.tasks.get(taskId);
    if (!node) return;
    const parent = this.contextFor(taskId);
    const span = this.tracer.startSpan(
      name,
      { kind: options.spanKind ?? SpanKind.INTERNAL, attributes },
      parent,
    );
    node.stack.push({
      kind,
      span,
      ctx: trace.setSpan(parent, span),
      key,
      name,
      budgetLabel: options.budgetLabel ?? null,
      timeoutId: null,
    });
  }

  /** The innermost open scope of `kind` (with `key`, unless null). */
  private find(taskId: number, kind: Scope["kind"], key: string | null): Scope | undefined {
    const stack = this.tasks.get(taskId)?.stack ?? [];
    for (let i = stack.length - 1; i >= 0; i--)
      if (stack[i]!.kind === kind && (key === null || stack[i]!.key === key)) return stack[i];
    return undefined;
  }

  /** The span a timeout scope reports on: its own, or the retry's or attempt's it merged into. */
  private timeoutScope(taskId: number, scopeId: number): Scope | undefined {
    const stack = this.tasks.get(taskId)?.stack ?? [];
    for (let i = stack.length - 1; i >= 0; i--) {
      const s = stack[i]!;
      if (s.timeoutId === scopeId || (s.kind === "timeout" && s.key === String(scopeId))) return s;
    }
    return undefined;
  }

  /** Ends `scope` and anything opened inside it still open, failed when `error` is given. */
  private endScope(taskId: number, scope: Scope | undefined, error: unknown): void {
    const stack = this.tasks.get(taskId)?.stack;
    if (!stack || !scope || !stack.includes(scope)) return;
    while (stack.length > 0) {
      const top = stack.pop()!;
      if (top === scope && error !== undefined) fail(top.span, error);
      top.span.end();
      if (top === scope) return;
    }
  }

  private timeoutStart(e: Of<"timeout:start">): void {
    const { scope, timeoutMs, deadlineLeftMs } = e;
    const attributes = {
      "keel.timeout.owner": scope.label,
      "keel.timeout.ms": timeoutMs,
      "keel.timeout.fired": false,
      ...deadlineLeft(deadlineLeftMs),
    };
    const stack = this.tasks.get(e.taskId)?.stack;
    const top = stack?.[stack.length - 1];
    const merges =
      top !== undefined &&
      top.timeoutId === null &&
      ((top.kind === "attempt" && top.name === scope.label) ||
        (top.kind === "retry" && top.budgetLabel === scope.label));
    if (merges) {
      top.timeoutId = scope.id;
      top.span.setAttributes(attributes);
      return;
    }
    this.open(e.taskId, "timeout", timeoutSpanName(scope.label), String(scope.id), attributes);
  }

  private timeoutEnd(e: Of<"timeout:end">): void {
    const scope = this.timeoutScope(e.taskId, e.scope.id);
    if (!scope) return;
    scope.span.setAttributes({ "keel.timeout.fired": e.fired, "keel.timeout.outcome": e.outcome });
    // A merged timeout's span is the retry's or the attempt's: their own events end it.
    if (scope.kind !== "timeout") return;
    this.endScope(e.taskId, scope, e.error);
  }

  private retryStart(e: Of<"retry:start">): void {
    const attributes: Attributes = {
      "keel.retry.label": e.label,
      "keel.retry.attempts": e.attempts,
      ...deadlineLeft(e.deadlineLeftMs),
    };
    if (e.budgetMs !== null) attributes["keel.retry.budget_ms"] = e.budgetMs;
    if (e.perAttemptMs !== null) attributes["keel.retry.per_attempt_ms"] = e.perAttemptMs;
    const budgetLabel = e.budgetMs === null ? undefined : `${e.label} budget ${e.budgetMs} ms`;
    this.open(e.taskId, "retry", e.label, e.label, attributes, { budgetLabel });
  }

  private attempt(e: Of<"retry:attempt">): void {
    const { taskId, label, attempt, attempts } = e;
    // A subscriber that arrived after the retry started still gets a retry span around its attempts.
    if (!this.find(taskId, "retry", label))
      this.open(taskId, "retry", label, label, {
        "keel.retry.label": label,
        "keel.retry.attempts": attempts,
      });
    this.open(taskId, "attempt", `${label} attempt ${attempt}`, label, {
      "keel.retry.attempt": attempt,
      "keel.retry.attempts": attempts,
      ...deadlineLeft(e.deadlineLeftMs),
    });
  }

  private job(e: Of<"worker:job">): void {
    const key = `${e.queue}/${e.jobId}`;
    if (e.transition === "start") {
      const attributes: Attributes = {
        "keel.job.queue": e.queue,
        "keel.job.id": e.jobId,
        "keel.job.attempt": e.attempt,
        ...deadlineLeft(e.deadlineLeftMs),
      };
      if (e.attempts !== undefined) attributes["keel.job.attempts"] = e.attempts;
      this.open(e.taskId, "job", `job ${e.queue}`, key, attributes, { spanKind: SpanKind.CONSUMER });
      return;
    }
    const scope = this.find(e.taskId, "job", key);
    if (!scope) return;
    scope.span.setAttribute("keel.job.outcome", e.transition);
    if (e.reason !== undefined) scope.span.setAttribute("keel.job.reason", e.reason);
    const failed = e.transition === "retry" || e.transition === "dead-letter";
    this.endScope(e.taskId, scope, failed ? (e.error ?? e.reason) : undefined);
  }

  private eventOn(taskId: number, name: string, attributes: Attributes): void {
    trace.getSpan(this.contextFor(taskId))?.addEvent(name, attributes);
  }
}

/**
 * A timeout span's name: its label, but a `timeoutAt`'s instant left out (span names stay few:
 * `timeoutAt`, `timeoutAt(sync stock)`). The instant is in `keel.timeout.owner`.
 */
function timeoutSpanName(label: string): string {
  const at = /^timeoutAt\([^,)]*(?:, (.*))?\)$/.exec(label);
  if (!at) return label;
  return at[1] === undefined ? "timeoutAt" : `timeoutAt(${at[1]})`;
}

/**
 * Spans from Keel's events: one per task that matters, timeout scope, retry and attempt, HTTP
 * request (with its phases, in `http-spans.ts`), job, and workflow run and step (`workflow-spans.ts`),
 * parented by the task tree (`span-tree.ts`).
 *
 * A retry's budget timeout, an attempt's own timeout and a delivery's deadline scope do not get a
 * span of their own: their span is the retry's, the attempt's or the job's, which carries
 * `keel.timeout.*`. A scope's end pops everything
 * opened inside it that is still open (a retry cut by an enclosing timeout ends with it).
 * @module
 */
import type { KeelEvent } from "@keel/core";
import { context, ROOT_CONTEXT, SpanKind, type TextMapPropagator, type Tracer } from "@opentelemetry/api";
import { addDeadlineLeft, fail, timeoutName } from "./common.js";
import { HttpSpans, type HttpSpansMode } from "./http-spans.js";
import type { KeelMetrics } from "./metrics.js";
import { extractContext, injectContext } from "./propagation.js";
import { type Attributes, type Scope, SpanTree } from "./span-tree.js";
import { WorkflowSpans } from "./workflow-spans.js";

/** Names Keel gives a task whose function has none: such tasks get no span of their own. */
const ANONYMOUS = new Set(["task", "op", "shielded", "keel"]);

type Of<T extends KeelEvent["type"]> = Extract<KeelEvent, { type: T }>;

/** The attributes of a task that gets no span (never read). */
const NO_ATTRIBUTES: Attributes = Object.freeze({}) as Attributes;

export class SpanTracker {
  private readonly tree: SpanTree;
  private readonly http: HttpSpans;
  private readonly workflows: WorkflowSpans;
  /** Job spans of cut deliveries whose task has ended, by `queue/id`, until their outcome comes. */
  private readonly endedJobs = new Map<string, Scope>();

  constructor(
    tracer: Tracer,
    metrics: KeelMetrics,
    private readonly propagator: TextMapPropagator | null,
    httpSpans: HttpSpansMode,
  ) {
    this.tree = new SpanTree(tracer);
    this.http = new HttpSpans(tracer, metrics, propagator, httpSpans);
    this.workflows = new WorkflowSpans(this.tree);
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
        this.tree.eventOn(e.taskId, "keel.cancel", attributes);
        this.tree.taskSpan(e.taskId)?.setAttributes(attributes);
        return;
      }
      case "timeout:start":
        this.timeoutStart(e);
        return;
      case "timeout:fire": {
        const attributes = { "keel.timeout.owner": e.scope.label, "keel.timeout.ms": e.timeoutMs };
        const scope = this.tree.timeoutScope(e.taskId, e.scope.id);
        if (scope) {
          scope.span.setAttribute("keel.timeout.fired", true);
          scope.span.addEvent("keel.timeout", attributes);
        } else this.tree.eventOn(e.taskId, "keel.timeout", attributes);
        return;
      }
      case "timeout:end":
        this.timeoutEnd(e);
        return;
      case "cleanup:overrun":
        this.tree.eventOn(e.taskId, "keel.cleanup.overrun", {
          "keel.cleanup.budget_ms": e.budgetMs,
          "keel.waiting_on": e.waitingOn ?? "",
        });
        return;
      case "cleanup:abandon":
        this.tree.eventOn(e.taskId, "keel.cleanup.abandon", { "keel.waiting_on": e.waitingOn ?? "" });
        return;
      case "shield:delay":
        this.tree.eventOn(e.taskId, "keel.shield.delay", { "keel.shield.delayed_ms": e.delayedMs });
        return;
      case "retry:start":
        this.retryStart(e);
        return;
      case "retry:attempt":
        this.attempt(e);
        return;
      case "retry:sleep":
        this.tree.end(e.taskId, this.tree.find(e.taskId, "attempt", null), e.error);
        this.tree.find(e.taskId, "retry", null)?.span.addEvent("keel.retry", {
          "keel.retry.attempt": e.attempt,
          "keel.retry.delay_ms": e.delayMs,
          "keel.retry.delay_reason": e.delayReason,
        });
        return;
      case "retry:giveup":
        this.tree.end(e.taskId, this.tree.find(e.taskId, "attempt", null), e.error);
        this.tree.find(e.taskId, "retry", null)?.span.setAttribute("keel.retry.giveup", e.reason);
        return;
      case "retry:success":
        this.tree.end(e.taskId, this.tree.find(e.taskId, "attempt", e.label), undefined);
        return;
      case "retry:end": {
        const retry = this.tree.find(e.taskId, "retry", e.label);
        retry?.span.setAttribute("keel.retry.outcome", e.outcome);
        const failed = e.outcome === "giveup" || e.outcome === "failed";
        this.tree.end(e.taskId, retry, failed ? e.error : undefined);
        return;
      }
      case "http:request": {
        const parent = this.tree.contextFor(e.taskId);
        // undici's own instrumentation makes the client span and writes the headers: it reads the
        // active context in `dispatch`, so that is where this task's context is made active.
        if (this.http.stepsAside()) e.dispatchWithin((dispatch) => context.with(parent, dispatch));
        else this.http.request(parent, e);
        return;
      }
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
      case "worker:add":
        // The adding task's context travels with the job: its deliveries link to it.
        injectContext(this.tree.contextFor(e.taskId), e.setTrace, this.propagator);
        return;
      case "worker:job":
        this.job(e);
        return;
      case "workflow:execution":
        this.workflows.execution(e);
        return;
      case "workflow:step":
        this.workflows.step(e);
        return;
    }
  }

  private start(e: Of<"task:start">): void {
    const named = e.parentId === null || !ANONYMOUS.has(e.name);
    // An anonymous task gets no span: its attributes are never read.
    const attributes: Attributes = named
      ? addDeadlineLeft(
          { "keel.task.path": e.path, "keel.task.id": e.taskId, "keel.root.id": e.rootId },
          e.deadlineLeftMs,
        )
      : NO_ATTRIBUTES;
    this.tree.start(e.taskId, e.parentId, named ? e.name : null, attributes, e.longLived === true);
  }

  private settle(e: Of<"task:settle">): void {
    // A delivery whose task ends with its job span open was cut: its slot ends the job next, and
    // that outcome (from the slot's task) ends the span.
    const job = this.tree.detach(e.taskId, "job");
    if (job) this.endedJobs.set(job.key, job);
    this.workflows.settling(e.taskId, e.reason?.message ?? e.reason?.kind);
    const span = this.tree.settle(e.taskId);
    this.http.settled(e.taskId);
    if (!span) return;
    span.setAttribute("keel.task.state", e.state);
    if (e.state === "failed") fail(span, e.error);
    else if (e.state === "cancelled" && e.reason) span.setAttribute("keel.cancel.reason", e.reason.kind);
    span.end();
  }

  private timeoutStart(e: Of<"timeout:start">): void {
    const { scope, timeoutMs, deadlineLeftMs } = e;
    const attributes = addDeadlineLeft(
      { "keel.timeout.owner": scope.label, "keel.timeout.ms": timeoutMs, "keel.timeout.fired": false },
      deadlineLeftMs,
    );
    const top = this.tree.top(e.taskId);
    // The delivery's deadline scope is the first opened in its job's span: the job's span carries
    // it (one span fewer per job, and the handler's work hangs from the job).
    const merges =
      top !== undefined &&
      top.timeoutId === null &&
      ((top.kind === "attempt" && top.name === scope.label) ||
        (top.kind === "retry" && top.budgetLabel === scope.label) ||
        top.kind === "job");
    if (merges) {
      top.timeoutId = scope.id;
      top.span.setAttributes(attributes);
      return;
    }
    this.tree.open(e.taskId, "timeout", timeoutName(scope.label), String(scope.id), attributes);
  }

  private timeoutEnd(e: Of<"timeout:end">): void {
    const scope = this.tree.timeoutScope(e.taskId, e.scope.id);
    if (!scope) return;
    scope.span.setAttributes({ "keel.timeout.fired": e.fired, "keel.timeout.outcome": e.outcome });
    // A merged timeout's span is the retry's or the attempt's: their own events end it.
    if (scope.kind !== "timeout") return;
    this.tree.end(e.taskId, scope, e.error);
  }

  private retryStart(e: Of<"retry:start">): void {
    const attributes: Attributes = addDeadlineLeft(
      { "keel.retry.label": e.label, "keel.retry.attempts": e.attempts },
      e.deadlineLeftMs,
    );
    if (e.budgetMs !== null) attributes["keel.retry.budget_ms"] = e.budgetMs;
    if (e.perAttemptMs !== null) attributes["keel.retry.per_attempt_ms"] = e.perAttemptMs;
    const budgetLabel = e.budgetMs === null ? undefined : `${e.label} budget ${e.budgetMs} ms`;
    this.tree.open(e.taskId, "retry", e.label, e.label, attributes, { budgetLabel });
  }

  private attempt(e: Of<"retry:attempt">): void {
    const { taskId, label, attempt, attempts } = e;
    // A subscriber that arrived after the retry started still gets a retry span around its attempts.
    if (!this.tree.find(taskId, "retry", label))
      this.tree.open(taskId, "retry", label, label, {
        "keel.retry.label": label,
        "keel.retry.attempts": attempts,
      });
    this.tree.open(
      taskId,
      "attempt",
      `${label} attempt ${attempt}`,
      label,
      addDeadlineLeft({ "keel.retry.attempt": attempt, "keel.retry.attempts": attempts }, e.deadlineLeftMs),
    );
  }

  private job(e: Of<"worker:job">): void {
    const key = `${e.queue}/${e.jobId}`;
    if (e.transition === "start") {
      // One left open by a delivery that never got its outcome (the worker torn down without its
      // shutdown) ends when the job is delivered again.
      this.endedJobs.get(key)?.span.end();
      this.endedJobs.delete(key);
      const attributes: Attributes = addDeadlineLeft(
        { "keel.job.queue": e.queue, "keel.job.id": e.jobId, "keel.job.attempt": e.attempt },
        e.deadlineLeftMs,
      );
      if (e.attempts !== undefined) attributes["keel.job.attempts"] = e.attempts;
      attributes["keel.task.path"] = e.path;
      // Each delivery is a trace of its own, or a child of the context the job was added under
      // (linked to it too, as a consumer span is to its producer): never of the worker's tasks.
      const producer = e.trace ? extractContext(e.trace, this.propagator) : null;
      this.tree.adopt(e.taskId);
      this.tree.open(e.taskId, "job", `job ${e.queue}`, key, attributes, {
        spanKind: SpanKind.CONSUMER,
        parent: producer?.ctx ?? ROOT_CONTEXT,
        links: producer ? [{ context: producer.span }] : undefined,
      });
      return;
    }
    const failed = e.transition === "retry" || e.transition === "dead-letter" || e.transition === "stalled";
    const error = failed ? (e.error ?? e.reason) : undefined;
    const detached = this.endedJobs.get(key);
    const scope = this.tree.find(e.taskId, "job", key) ?? detached;
    if (!scope) return;
    scope.span.setAttribute("keel.job.outcome", e.transition);
    if (e.reason !== undefined) scope.span.setAttribute("keel.job.reason", e.reason);
    if (scope !== detached) {
      this.tree.end(e.taskId, scope, error);
      return;
    }
    this.endedJobs.delete(key);
    if (error !== undefined) fail(scope.span, error);
    scope.span.end();
  }
}

/**
 * Spans of durable workflows (`@keel/workflow`): one trace per execution, a span per run of its
 * body, a child span per step.
 *
 * **One trace per execution, in every process.** An execution outlives the process that starts it:
 * it parks for days, is replayed after a crash by another process, is handed back at a deploy. No
 * span can cover it, and no process can pass the next one a context (the store holds none). So its
 * trace id is derived from its id: the first 16 bytes of sha256(executionId), and every run's span
 * is the child of one remote span context with that trace id and the next 8 bytes as its span id,
 * a parent that stands for the execution and is never exported. Any process that runs the
 * execution reaches the same trace with nothing stored or sent; a backend shows the runs as
 * siblings under a missing root (the execution). Two executions with one id (two stores, say
 * staging and production, exporting to one backend) share a trace: keep ids unique where traces
 * meet. The parent is marked sampled, so a parent-based sampler (the SDK's default) records every
 * run: a decision made per process would leave holes in one execution's trace.
 *
 * **A span per run.** `workflow <name>` from a claim's `run` to its `park`, end (`complete`,
 * `fail`, `cancel`), `hand-back` or `lost`, on the execution's task (a task of the engine's
 * resource); the body's task has no span of its own (the run's span stands for it), and the
 * execution task's other children (its lease keeper) none either.
 *
 * **A span per step.** `step <key>` from the step's `start` to its `end` (its outcome journaled),
 * on the task that asked for it; the step's own task has no span (the step's stands for it), so
 * what the step does (its retries, its HTTP calls) hangs from it. A step taken from the journal is a
 * span of no duration, `keel.workflow.step.replayed = true`: a span rather than an event on the
 * run's span so that one query (`step charge#1`) finds both the run that ran it and the runs that
 * replayed it, each where its branch asked for it; replays happen only as a run starts, so they add
 * no more spans than the journal has entries.
 * @module
 */
import { createHash } from "node:crypto";
import type { KeelEvent } from "@keel/core";
import { type Context, ROOT_CONTEXT, TraceFlags, trace } from "@opentelemetry/api";
import type { Attributes, SpanTree } from "./span-tree.js";

type Of<T extends KeelEvent["type"]> = Extract<KeelEvent, { type: T }>;

/**
 * The trace id of a workflow execution's spans, in every process that runs it: the first 16 bytes
 * of sha256(executionId), as 32 hex digits. Derived rather than stored, so that a process
 * replaying the execution after a crash reaches the same trace with nothing passed to it, and so
 * that an admin page can link an execution to its trace.
 *
 * @example
 * ```ts
 * import { workflowTraceId } from "@keel/otel";
 * const id = workflowTraceId("order-7");
 * console.log(id.length, id === workflowTraceId("order-7")); // 32 true
 * ```
 */
export function workflowTraceId(executionId: string): string {
  return digestOf(executionId).slice(0, 32);
}

const digestOf = (executionId: string) => createHash("sha256").update(executionId).digest("hex");

/**
 * The context every run of `executionId` is started under, in any process (see the module's
 * comment): a remote, sampled span context whose ids are the sha256 of the id.
 */
export function executionContext(executionId: string): Context {
  const digest = digestOf(executionId);
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: digest.slice(0, 32),
    // An all-zero id (invalid, which would start a fresh trace) has odds of 2^-64.
    spanId: digest.slice(32, 48),
    traceFlags: TraceFlags.SAMPLED,
    isRemote: true,
  });
}

/** The outcome attribute a run's last event gives it. */
const OUTCOME = "keel.workflow.run.outcome";

export class WorkflowSpans {
  constructor(private readonly tree: SpanTree) {}

  execution(e: Of<"workflow:execution">): void {
    const body = `workflow ${e.workflow} ${e.executionId}`;
    if (e.transition === "run") {
      this.tree.host(e.taskId);
      const attributes: Attributes = {
        "keel.workflow.name": e.workflow,
        "keel.workflow.execution.id": e.executionId,
        "keel.workflow.run.replayed": e.replayed ?? 0,
        "keel.task.path": e.path,
      };
      const scope = this.tree.open(
        e.taskId,
        "workflow",
        `workflow ${e.workflow}`,
        e.executionId,
        attributes,
        {
          parent: executionContext(e.executionId),
        },
      );
      if (scope) this.tree.standIn(e.taskId, body, scope.ctx);
      return;
    }
    this.tree.dropStandIn(e.taskId, body);
    const scope = this.tree.find(e.taskId, "workflow", e.executionId);
    if (!scope) return;
    scope.span.setAttribute(OUTCOME, e.transition);
    if (e.waitingOn) scope.span.setAttribute("keel.workflow.run.waiting_on", e.waitingOn);
    if (e.transition === "cancel" && e.error instanceof Error)
      scope.span.setAttribute("keel.workflow.run.cancel_reason", e.error.message);
    const failed = e.transition === "fail" || e.transition === "lost";
    this.tree.end(e.taskId, scope, failed ? (e.error ?? e.transition) : undefined);
  }

  step(e: Of<"workflow:step">): void {
    const name = `step ${e.key}`;
    const attributes: Attributes = {
      "keel.workflow.name": e.workflow,
      "keel.workflow.execution.id": e.executionId,
      "keel.workflow.step.key": e.key,
    };
    if (e.transition === "replay") {
      attributes["keel.workflow.step.replayed"] = true;
      if (e.ok !== undefined) attributes["keel.workflow.step.ok"] = e.ok;
      this.tree.instant(e.taskId, name, attributes);
      return;
    }
    if (e.transition === "start") {
      attributes["keel.workflow.step.replayed"] = false;
      const scope = this.tree.open(e.taskId, "step", name, e.key, attributes);
      // The step's task is the next child of this task, named after the step.
      if (scope) this.tree.standIn(e.taskId, name, scope.ctx);
      return;
    }
    this.tree.dropStandIn(e.taskId, name);
    const scope = this.tree.find(e.taskId, "step", e.key);
    if (!scope) return;
    if (e.attempts !== undefined) scope.span.setAttribute("keel.workflow.step.attempts", e.attempts);
    if (e.ok !== undefined) scope.span.setAttribute("keel.workflow.step.ok", e.ok);
    this.tree.end(e.taskId, scope, e.ok === false ? (e.error ?? "the step failed") : undefined);
  }

  /**
   * The task is settling with run or step spans open: their end was never reported (the body
   * evicted when its claim was lost, a step cut by a shutdown). Marked so, before the settle ends them.
   */
  settling(taskId: number, reason: string | undefined): void {
    for (const scope of this.tree.scopes(taskId)) {
      if (scope.kind === "step") scope.span.setAttribute("keel.workflow.step.interrupted", true);
      else if (scope.kind === "workflow") scope.span.setAttribute(OUTCOME, "interrupted");
      else continue;
      if (reason !== undefined) scope.span.setAttribute("keel.workflow.interrupted_by", reason);
    }
  }
}

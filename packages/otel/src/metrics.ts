/**
 * Keel's metrics, recorded from its events (the table is in docs/guide/operating.md).
 * @module
 */
import type { KeelEvent } from "@keel/core";
import type { Meter } from "@opentelemetry/api";
import { timeoutName } from "./common.js";
import { httpAttributes } from "./http-attributes.js";

const BREAKER_STATE: Record<string, number> = { closed: 0, "half-open": 1, open: 2 };

/** A workflow run's last transition, for the ones that end the execution: the status it ends in. */
const ENDED: Record<string, string> = { complete: "completed", fail: "failed", cancel: "cancelled" };

/** The instruments, and how each event moves them. */
export class KeelMetrics {
  private readonly liveTasks;
  private readonly cancellations;
  private readonly timeouts;
  private readonly retries;
  private readonly overruns;
  private readonly abandonments;
  private readonly breakerState;
  private readonly semaphoreWaiters;
  private readonly semaphoreWait;
  private readonly limiterWaiters;
  private readonly limiterWait;
  private readonly channelDepth;
  private readonly httpDuration;
  private readonly jobs;
  private readonly jobDuration;
  private readonly workflowSteps;
  private readonly workflowStepDuration;
  private readonly workflowExecutions;
  /** When each job attempt in flight started (by root, queue, id and attempt), on its run's clock. */
  private readonly jobStarts = new Map<string, number>();

  constructor(meter: Meter) {
    this.liveTasks = meter.createUpDownCounter("keel.tasks.live", {
      description: "Tasks started and not yet settled.",
    });
    this.cancellations = meter.createCounter("keel.cancellations", {
      description: "Cancellation requests, by reason.",
    });
    this.timeouts = meter.createCounter("keel.timeouts", { description: "Timeouts that fired." });
    this.retries = meter.createCounter("keel.retries", {
      description: "Attempts that failed and were retried.",
    });
    this.overruns = meter.createCounter("keel.cleanup.overruns", {
      description: "Cleanups cut at their budget.",
    });
    this.abandonments = meter.createCounter("keel.cleanup.abandonments", {
      description: "Tasks abandoned after the cut.",
    });
    this.breakerState = meter.createGauge("keel.breaker.state", {
      description: "A circuit breaker's state: 0 closed, 1 half-open, 2 open.",
    });
    this.semaphoreWaiters = meter.createGauge("keel.semaphore.waiters", {
      description: "Tasks waiting for a permit.",
    });
    this.semaphoreWait = meter.createHistogram("keel.semaphore.wait.duration", {
      description: "How long a task waited for a permit.",
      unit: "ms",
    });
    this.limiterWaiters = meter.createGauge("keel.limiter.waiters", {
      description: "Tasks waiting for a token.",
    });
    this.limiterWait = meter.createHistogram("keel.limiter.wait.duration", {
      description: "How long a task waited for a token.",
      unit: "ms",
    });
    this.channelDepth = meter.createGauge("keel.channel.depth", {
      description: "Values buffered in a channel.",
    });
    this.httpDuration = meter.createHistogram("http.client.request.duration", {
      description: "Duration of HTTP client requests (one per attempt).",
      unit: "s",
    });
    this.jobs = meter.createCounter("keel.jobs", { description: "Job attempts that ended, by outcome." });
    this.jobDuration = meter.createHistogram("keel.job.duration", {
      description: "How long a job attempt ran, from its start to its outcome.",
      unit: "ms",
    });
    this.workflowSteps = meter.createCounter("keel.workflow.steps", {
      description: "Workflow steps that ended (ok, error) or were taken from the journal (replayed).",
    });
    this.workflowStepDuration = meter.createHistogram("keel.workflow.step.duration", {
      description: "How long a workflow step ran, its retries included, until its outcome was journaled.",
      unit: "ms",
    });
    this.workflowExecutions = meter.createCounter("keel.workflow.executions", {
      description: "Workflow executions that ended, by status.",
    });
  }

  record(e: KeelEvent): void {
    switch (e.type) {
      case "task:start":
        this.liveTasks.add(1);
        return;
      case "task:settle":
        this.liveTasks.add(-1);
        return;
      case "cancel:request":
        this.cancellations.add(1, { "keel.cancel.reason": e.reason.kind });
        return;
      case "timeout:fire":
        this.timeouts.add(1, { "keel.timeout.owner": timeoutName(e.scope.label ?? e.scope.kind) });
        return;
      case "retry:sleep":
        this.retries.add(1, { "keel.retry.delay_reason": e.delayReason });
        return;
      case "cleanup:overrun":
        this.overruns.add(1);
        return;
      case "cleanup:abandon":
        this.abandonments.add(1);
        return;
      case "breaker:state":
        this.breakerState.record(BREAKER_STATE[e.to] ?? -1, { "keel.breaker.name": e.name });
        return;
      case "semaphore:wait":
        this.semaphoreWaiters.record(e.waiting, { "keel.semaphore.name": e.name });
        return;
      case "semaphore:acquire":
        this.semaphoreWaiters.record(e.waiting, { "keel.semaphore.name": e.name });
        this.semaphoreWait.record(e.waitedMs, { "keel.semaphore.name": e.name });
        return;
      case "limiter:wait":
        this.limiterWaiters.record(e.waiting, { "keel.limiter.name": e.name });
        return;
      case "limiter:acquire":
        this.limiterWaiters.record(e.waiting, { "keel.limiter.name": e.name });
        this.limiterWait.record(e.waitedMs, { "keel.limiter.name": e.name });
        return;
      case "channel:depth":
        this.channelDepth.record(e.size, { "keel.channel.name": e.name });
        return;
      case "worker:job": {
        const key = `${e.rootId} ${e.queue}/${e.jobId} ${e.attempt}`;
        if (e.transition === "start") {
          this.jobStarts.set(key, e.at);
          return;
        }
        const attributes = { "keel.job.queue": e.queue, "keel.job.outcome": e.transition };
        this.jobs.add(1, attributes);
        // Only a completion carries its duration; every other outcome is timed from its start.
        const startedAt = this.jobStarts.get(key);
        this.jobStarts.delete(key);
        const durationMs = e.durationMs ?? (startedAt === undefined ? undefined : e.at - startedAt);
        if (durationMs !== undefined) this.jobDuration.record(durationMs, attributes);
        return;
      }
      case "workflow:step": {
        if (e.transition === "start") return;
        const outcome = e.transition === "replay" ? "replayed" : e.ok ? "ok" : "error";
        const attributes = { "keel.workflow.name": e.workflow, "keel.workflow.step.outcome": outcome };
        this.workflowSteps.add(1, attributes);
        if (e.transition === "end" && e.durationMs !== undefined)
          this.workflowStepDuration.record(e.durationMs, attributes);
        return;
      }
      case "workflow:execution": {
        const status = ENDED[e.transition];
        if (status !== undefined)
          this.workflowExecutions.add(1, {
            "keel.workflow.name": e.workflow,
            "keel.workflow.status": status,
          });
        return;
      }
    }
  }

  /** One HTTP attempt ended: its duration with the semantic conventions' attributes. */
  recordHttp(
    method: string,
    url: string,
    elapsedMs: number,
    status: number | null,
    errorType: string | null,
  ): void {
    const attributes = httpAttributes(method, url, false);
    if (status !== null) attributes["http.response.status_code"] = status;
    if (errorType !== null) attributes["error.type"] = errorType;
    this.httpDuration.record(elapsedMs / 1000, attributes);
  }
}

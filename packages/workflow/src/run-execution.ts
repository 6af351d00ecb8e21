/**
 * One claimed execution, run to its end, its park, its loss, or a shutdown: the task an engine
 * spawns per claim. It replays the body, keeps the claim's lease, delivers a cancel or the deadline
 * (rule W10, W11), and writes the outcome.
 * @module
 */

import type { Clock } from "@keel/core";
import {
  emitEvent,
  eventsWanted,
  evict,
  guardWaits,
  isCancelled,
  isTaskCancelledError,
  type Operation,
  sleep,
  spawn,
  spawnEvictable,
  type Task,
  until,
} from "@keel/core";
import { CURRENT } from "./current.js";
import type { Workflow } from "./definition.js";
import { ExecutionDeadlineError, UnknownWorkflowError } from "./errors.js";
import { Incarnation } from "./incarnation.js";
import { journalError, restoreError, unwrapValue, wrapValue } from "./json.js";
import type { Claimed, Finish, WorkflowStore } from "./store/store.js";
import { LeaseLostError } from "./store/store-errors.js";
import { storeCall } from "./store-call.js";

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

export interface RunContext {
  readonly store: WorkflowStore;
  readonly clock: Clock;
  readonly owner: string;
  readonly leaseMs: number;
  readonly parkAfterMs: number;
  readonly storeTimeoutMs: number;
  find(name: string, version: number): Workflow<unknown, unknown> | undefined;
  known(): string[];
  /** Called when the run starts and when it ends (the engine's live map, its doorbell). */
  started(inc: Incarnation): void;
  /** `finish`: the outcome this run wrote, or null when it wrote none (parked, lost, handed back). */
  ended(id: string, finish: Finish | null): void;
}

export function runExecution(ctx: RunContext, claimed: Claimed): () => Operation<void> {
  return function* execution() {
    const { record } = claimed;
    const lease = { owner: ctx.owner, generation: record.generation };
    const definition = ctx.find(record.workflow, record.version);
    if (!definition) {
      const error = new UnknownWorkflowError(record.workflow, record.version, ctx.known());
      const finish: Finish = { status: "failed", error: journalError(error), nowMs: ctx.clock.now() };
      const written = yield* until(
        storeCall(ctx.clock, ctx.store, ctx.storeTimeoutMs, `finish ${record.id}`, () =>
          ctx.store.finish(record.id, lease, finish),
        ).then(
          () => true,
          () => false,
        ),
      );
      ctx.ended(record.id, written ? finish : null);
      return;
    }
    const inc = new Incarnation({
      record,
      journal: claimed.journal,
      signals: claimed.signals,
      definition,
      store: ctx.store,
      clock: ctx.clock,
      lease,
      parkAfterMs: ctx.parkAfterMs,
      storeTimeoutMs: ctx.storeTimeoutMs,
    });
    ctx.started(inc);
    const wanted = yield* eventsWanted();
    const event = { type: "workflow:execution", workflow: definition.name, executionId: record.id } as const;
    if (wanted) yield* emitEvent({ ...event, transition: "run", replayed: claimed.journal.length });
    let cancelDeadline: (() => void) | null = null;
    let status: string | null = null;
    let written: Finish | null = null;
    try {
      yield* spawn(keepLease(ctx, inc), { name: "lease" });
      if (record.cancelRequested !== null) inc.requestStop("cancel", record.cancelRequested);
      if (record.deadlineAt !== null) {
        const at = record.deadlineAt;
        const stop = () => inc.requestStop("deadline", "the execution's deadline passed");
        if (at <= ctx.clock.now()) stop();
        else cancelDeadline = ctx.clock.schedule(at, stop);
      }
      const input = unwrapValue(record.input);
      // The body's error is the execution's outcome, not a failure of this task: caught in the
      // body's own task (a cancellation passes, and settles it cancelled).
      // Evictable: the runner's cancellation (a shutdown) does not reach the body; the runner hands
      // it back instead (`handBack`), so its `finally` blocks run only when the execution ends.
      inc.body = yield* spawnEvictable(
        CURRENT.with(
          inc,
          guardWaits(inc.guard, function* body(): Generator<unknown, Outcome, unknown> {
            try {
              return { ok: true, value: yield* definition.body(input) };
            } catch (error) {
              if (isCancelled(error)) throw error;
              return { ok: false, error };
            }
          }),
        ),
        { name: `workflow ${definition.name} ${record.id}` },
      );
      let outcome: Outcome;
      try {
        outcome = (yield* inc.body) as Outcome;
      } catch (error) {
        if (isCancelled(error)) throw error;
        outcome = { ok: false, error };
      }
      if (inc.state === "parking") {
        yield* until(inc.parked!);
        const waitingOn = inc.parkedOn ?? "";
        if (wanted && (inc.state as string) === "parked")
          yield* emitEvent({ ...event, transition: "park", waitingOn });
      }
      if (inc.state === "lost" && wanted)
        yield* emitEvent({ ...event, transition: "lost", error: inc.fatal });
      if (inc.state !== "running") return;
      const finish = outcomeOf(inc, outcome, ctx.clock.now());
      status = finish.status;
      try {
        yield* until(inc.io("finish", () => ctx.store.finish(record.id, lease, finish)));
        written = finish;
      } catch (error) {
        inc.lose(error);
        status = null;
      }
      if (wanted && status !== null) {
        const transition = status === "completed" ? "complete" : status === "failed" ? "fail" : "cancel";
        const error = finish.status === "completed" ? undefined : restoreError(finish.error);
        yield* emitEvent({ ...event, transition, ...(error ? { error } : {}) });
      }
    } finally {
      cancelDeadline?.();
      const body = inc.body;
      if (body !== null && !isSettled(body) && inc.state === "running") {
        yield* handBack(ctx, inc, body);
        if (wanted) yield* emitEvent({ ...event, transition: "hand-back" });
      }
      ctx.ended(record.id, written);
    }
  };
}

function isSettled(task: Task<unknown>): boolean {
  return task.state === "completed" || task.state === "failed" || task.state === "cancelled";
}

/**
 * A shutdown reached the execution: its steps in flight are cancelled (their cleanup runs, under
 * their budget), then the body is evicted (its `finally` blocks do not run here: the execution is
 * not over) and the claim is released, so another process takes it at once.
 */
function* handBack(
  ctx: RunContext,
  inc: Incarnation,
  body: Task<unknown>,
): Generator<unknown, void, unknown> {
  inc.state = "shutdown";
  const steps = [...inc.steps];
  for (const s of steps) s.cancel("the worker is shutting down");
  yield* until(Promise.allSettled(steps));
  evict(body, "the worker is shutting down: the execution is handed back");
  yield* until(
    inc.io("release", () => ctx.store.release(inc.id, inc.lease, ctx.clock.now())).catch(() => {}),
  );
}

function outcomeOf(inc: Incarnation, outcome: Outcome, nowMs: number): Finish {
  if (inc.fatal !== null) return { status: "failed", error: journalError(inc.fatal), nowMs };
  const stop = inc.stopDelivered ? inc.stop : null;
  const stoppedHere = !outcome.ok && (isTaskCancelledError(outcome.error) || isCancelled(outcome.error));
  if (stop !== null && (outcome.ok || stoppedHere)) {
    if (stop.kind === "deadline")
      return {
        status: "failed",
        error: journalError(new ExecutionDeadlineError(inc.id, inc.record.deadlineAt!)),
        nowMs,
      };
    return { status: "cancelled", error: { name: "Cancelled", message: stop.message }, nowMs };
  }
  if (outcome.ok) {
    try {
      return { status: "completed", output: wrapValue(outcome.value, "the workflow's result"), nowMs };
    } catch (error) {
      return { status: "failed", error: journalError(error), nowMs };
    }
  }
  return { status: "failed", error: journalError(outcome.error), nowMs };
}

/**
 * Renews the claim every third of the lease. A renewal refused means another process took the
 * execution: this incarnation stops at once. A renewal that fails (the store does not answer) is
 * tried again at the next tick while the lease still holds; the incarnation stops only when the
 * next try would come after the lease has ended (so a blip costs nothing, and a process cut off
 * from its store stops its steps before another can claim the execution). Each renewal also
 * reads the record, for a cancel requested from another process, and the signals, for the events
 * the body waits on.
 */
function keepLease(ctx: RunContext, inc: Incarnation): () => Operation<void> {
  return function* lease() {
    const everyMs = Math.max(1, Math.floor(ctx.leaseMs / 3));
    let leaseUntil = ctx.clock.now() + ctx.leaseMs;
    for (;;) {
      yield* sleep(everyMs);
      if (inc.state !== "running") return;
      const next = ctx.clock.now() + ctx.leaseMs;
      const kept = yield* until(
        inc
          .io("renew", () => ctx.store.renew(inc.id, inc.lease, next))
          .then(
            (ok) => (ok ? "kept" : "lost"),
            () => "failed" as const,
          ),
      );
      if (kept === "kept") leaseUntil = next;
      if (kept === "lost" || (kept === "failed" && ctx.clock.now() + everyMs >= leaseUntil)) {
        inc.lose(new LeaseLostError(inc.id, inc.lease.owner, inc.lease.generation));
        return;
      }
      if (kept === "failed") continue;
      const record = yield* until(inc.io("read", () => ctx.store.get(inc.id)).catch(() => null));
      if (record?.cancelRequested != null) inc.requestStop("cancel", record.cancelRequested);
      if (inc.waits.events.length > 0) {
        const signals = yield* until(inc.io("signals", () => ctx.store.signals(inc.id)).catch(() => []));
        for (const s of signals) inc.waits.received(s);
      }
    }
  };
}

/**
 * The limits of one attempt: the phase in progress (connect, headers, a gap in the body) and, when
 * the attempt owns it, the call's `totalMs`, all on one re-pointable timer.
 *
 * Why not a timeout scope per phase: each scope costs a timer, a frame exit and two generator
 * layers, on every request. Only the attempt's own waits run inside these limits (no user code), so
 * a timer that ends the wait, checked when the wait ends, gives the outcomes of the scopes it
 * replaces:
 * - a limit due at the instant its phase would have ended wins (deadlines are inclusive): the check
 *   comes before the attempt looks at what the exchange did;
 * - the total wins over a phase limit due at the same instant;
 * - an enclosing claim (the caller's timeout, `retry`'s limits, a cancel) wins over both: it reaches
 *   the wait as a delivered cancellation, which the attempt lets through unconverted.
 *
 * Each limit still has a frame with its deadline, so the deadline in force (`remaining()`, the
 * deadline header, the task tree) is what it was with a scope per phase.
 *
 * The timer is re-pointed lazily: a limit later than the armed instant leaves it where it is (the
 * usual case: the connect limit is armed first and is the nearest), and a timer that fires before any
 * limit is due re-arms at the nearest one.
 * @module
 */

import { roundMs } from "../format-value.js";
import type { Frame } from "../kernel/frame.js";
import { exitFrame } from "../kernel/frame-exit.js";
import type { TaskImpl } from "../kernel/task.js";
import { type HttpPhase, HttpTimeoutError } from "./errors.js";
import type { RequestPlan } from "./plan.js";

/**
 * The attempt's timer, as the exchange carries it: one clock timer, armed at the nearest limit in
 * force.
 */
export interface AttemptTimer {
  readonly plan: RequestPlan;
  /** The limit that ran out, once one has (`total` when both were due); never reset. */
  expired: HttpPhase | null;
  phase: HttpPhase | null;
  phaseAt: number;
  armedAt: number;
  cancelTimer: (() => void) | null;
  /** When the call's total began counting, and its length when this attempt enforces it (else Infinity). */
  readonly totalFrom: number;
  readonly totalMs: number;
  readonly totalAt: number;
  readonly fire: () => void;
  /** Ends the wait in progress whatever the exchange's state: a limit ran out. */
  interrupt(): void;
}

/** A wait begins, limited at `at` (Infinity: only the total); phase null wakes without failing. */
export function enterLimit(ex: AttemptTimer, phase: HttpPhase | null, at: number): void {
  ex.phase = phase;
  ex.phaseAt = at;
  const due = Math.min(at, ex.totalAt);
  if (due < ex.armedAt) {
    if (ex.cancelTimer) ex.cancelTimer();
    ex.armedAt = due;
    ex.cancelTimer = ex.plan.clock.schedule(due, ex.fire);
  }
}

/** Disarms the timer: on every exit of the attempt, and before the body is handed to other reads. */
export function stopTimer(ex: AttemptTimer): void {
  const c = ex.cancelTimer;
  ex.cancelTimer = null;
  ex.armedAt = Infinity;
  ex.phaseAt = Infinity;
  if (c) c();
}

export function fireTimer(ex: AttemptTimer): void {
  ex.cancelTimer = null;
  ex.armedAt = Infinity;
  const now = ex.plan.clock.now();
  if (ex.totalAt <= now) ex.expired = "total";
  else if (ex.phaseAt <= now) ex.expired = ex.phase;
  else {
    enterLimit(ex, ex.phase, ex.phaseAt);
    return;
  }
  ex.interrupt();
}

/** A phase limit in force: its frame (the deadline in force while it lasts) and when it began. */
export interface PhaseLimit {
  readonly frame: Frame;
  readonly phase: HttpPhase;
  readonly ms: number;
  readonly enteredAt: number;
}

const phaseLabels: Record<HttpPhase, string> = {
  connect: "connect",
  headers: "headers",
  body: "body idle",
  total: "total",
};

/**
 * Begins a wait of `phase` limited to `ms` from now: null when unlimited (the total still applies).
 * A limit already spent starts nothing and throws at once, as a timeout scope of 0 ms would.
 */
export function openPhase(
  task: TaskImpl<unknown>,
  ex: AttemptTimer,
  phase: HttpPhase,
  ms: number,
): PhaseLimit | null {
  task.checkpoint();
  if (ms === Infinity) {
    enterLimit(ex, phase, Infinity);
    return null;
  }
  const plan = ex.plan;
  const enteredAt = plan.clock.now();
  const deadline = enteredAt + ms;
  if (deadline <= enteredAt) throw timeoutError(task, plan, phase, ms, deadline, 0);
  const frame = task.pushFrame("timeout", `${plan.label} ${phaseLabels[phase]}`, deadline);
  enterLimit(ex, phase, deadline);
  return { frame, phase, ms, enteredAt };
}

/**
 * Ends the wait begun by {@link openPhase}: `failure` is what the wait threw (a delivered
 * cancellation), which passes through; otherwise a limit that ran out throws its timeout.
 */
export function closePhase(
  task: TaskImpl<unknown>,
  ex: AttemptTimer,
  limit: PhaseLimit | null,
  failure: unknown,
): void {
  const expired = failure === null ? ex.expired : null;
  if (limit) {
    let error: unknown = failure;
    if (failure === null && expired === limit.phase) {
      const { phase, ms, enteredAt } = limit;
      const elapsedMs = ex.plan.clock.now() - enteredAt;
      reportFired(task, limit.frame, ms, enteredAt + ms);
      error = timeoutError(task, ex.plan, phase, ms, enteredAt + ms, elapsedMs);
    }
    if (error === null) endFrame(task, limit.frame);
    else throwThrough(task, limit.frame, error);
  } else if (failure !== null) throw failure;
  if (expired === "total") throw totalTimeout(task, ex);
}

/**
 * Ends a frame of this module normally. Nothing is spawned into these frames and they never request
 * a cancellation, so their exit is the pop itself (the kernel's exit, without its iterator).
 */
export function endFrame(task: TaskImpl<unknown>, frame: Frame): void {
  frame.bodySettled = true;
  task.popFrame(frame);
}

/** Ends a frame of this module with what was thrown through it, by the kernel's exit (its counting rule). */
export function throwThrough(task: TaskImpl<unknown>, frame: Frame, error: unknown): never {
  exitFrame(task, frame, { ok: false, error }).next();
  throw error;
}

/** The timeout of `phase`, reported as an `http:timeout` event when it is made. */
export function timeoutError(
  task: TaskImpl<unknown>,
  plan: RequestPlan,
  phase: HttpPhase,
  timeoutMs: number,
  deadline: number,
  elapsedMs: number,
): HttpTimeoutError {
  task.emit({ type: "http:timeout", method: plan.method, url: plan.href, phase, timeoutMs });
  return new HttpTimeoutError({ phase, timeoutMs, deadline, elapsedMs, label: plan.label });
}

/**
 * The kernel's events for a limit that fired (semantics §9: every timeout firing and cancellation
 * request is an event), as its timeout scope would have emitted them; built only for a listener.
 */
function reportFired(
  task: TaskImpl<unknown>,
  frame: Frame | null,
  timeoutMs: number,
  deadline: number,
): void {
  if (!task.runtime.listening || frame === null) return;
  const scope = frame.info;
  task.emit({ type: "timeout:fire", scope, timeoutMs, deadline });
  task.emit({
    type: "cancel:request",
    reason: {
      kind: "timeout",
      at: task.clock.now(),
      scope,
      message: `${frame.label}: timed out after ${roundMs(timeoutMs)} ms`,
    },
    owner: scope,
  });
}

/** The frame of the call's total, on the stack while its attempt runs (the timeout path only). */
function totalFrame(task: TaskImpl<unknown>, ex: AttemptTimer): Frame | null {
  const label = `${ex.plan.label} total`;
  for (let f: Frame | null = task.top; f; f = f.parent)
    if (f.kind === "timeout" && f.label === label) return f;
  return null;
}

/** The call's total, run out during the attempt that enforces it. */
export function totalTimeout(task: TaskImpl<unknown>, ex: AttemptTimer): HttpTimeoutError {
  reportFired(task, totalFrame(task, ex), ex.totalMs, ex.totalAt);
  const elapsedMs = ex.plan.clock.now() - ex.totalFrom;
  return timeoutError(task, ex.plan, "total", ex.totalMs, ex.totalAt, elapsedMs);
}

/**
 * The runtime a task tree shares: where its events go.
 * @module
 */
import { KeelError } from "../errors.js";
import { describeThrown } from "../format-value.js";
import type { KeelEvent } from "../observe/events.js";
import { warningEvents } from "../observe/events.js";
import type { AsyncContext } from "./async-context.js";

/** Where a task tree's events go, and the async context its tasks' steps run in. */
export interface Runtime {
  emit(event: KeelEvent): void;
  /** True when someone receives every event; otherwise only warnings are worth building. */
  readonly listening: boolean;
  /** Entered by the scheduler around every step of a task of this runtime (see `async-context.ts`). */
  readonly asyncContext: AsyncContext;
}

/**
 * A runtime that hands every event to `onEvent`; without one, warnings (overruns, swallows,
 * abandonments, suppressed errors) go to `onWarning` (a run's logger), or else to `console.warn`, so nothing is lost silently. A printed
 * warning gives its time as whole ms since `origin`, the root's start on its clock (a real clock
 * reads a fractional epoch, which nobody can read).
 */
export function createRuntime(
  asyncContext: AsyncContext,
  onEvent?: (event: KeelEvent) => void,
  origin = 0,
  onWarning?: (event: KeelEvent) => void,
): Runtime {
  return {
    listening: onEvent !== undefined,
    asyncContext,
    emit(event) {
      if (onEvent) {
        try {
          onEvent(event);
        } catch (e) {
          console.error("keel: an onEvent handler threw", e);
        }
      } else if (onWarning && warningEvents.has(event.type)) {
        onWarning(event);
      } else if (warningEvents.has(event.type)) {
        const ms = Math.round(event.at - origin);
        console.warn(
          `keel: ${event.type} at ${event.path} (${ms} ms after the run started)`,
          describeWarning(event),
        );
      }
    },
  };
}

/**
 * The same tree's runtime with another async context: for a task started from a callback
 * (`scope.spawn`), whose steps run in the context in force where it was started. Same shape as
 * `createRuntime`'s, so reading a runtime stays monomorphic.
 */
export function withAsyncContext(runtime: Runtime, asyncContext: AsyncContext): Runtime {
  return { listening: runtime.listening, asyncContext, emit: runtime.emit };
}

/** @internal What a warning says, after its type and path (empty for an event that is not one). */
export function describeWarning(event: KeelEvent): string {
  switch (event.type) {
    case "cleanup:overrun":
      return `cleanup exceeded ${event.budgetMs} ms while waiting on ${event.waitingOn ?? "nothing"}`;
    case "cleanup:abandon":
      return `abandoned while waiting on ${event.waitingOn ?? "nothing"}`;
    case "cleanup:swallow":
      return `a Cancelled (${event.reason.kind}) was swallowed`;
    case "error:suppressed":
      return `${event.context}: ${describeThrown(event.error)}`;
    case "cancel:replaced":
      return `the cancellation (${event.reason.kind}) was replaced by ${describeThrown(event.error)}`;
    case "retry:unreachable":
      return event.message;
    case "task:blocked":
      return `a step ran ${event.durationMs} ms without yielding, blocking the event loop (threshold ${event.thresholdMs} ms)`;
    case "deadline:missing":
      return `${event.label}: an external call with no deadline of its caller's above it (only its own limits, if any, bound it)`;
    default:
      return "";
  }
}

/** The error thrown into a generator that yielded something that is not an instruction. */
export function notAnInstruction(value: unknown): KeelError {
  const hint =
    typeof value === "object" && value !== null && typeof (value as PromiseLike<unknown>).then === "function"
      ? "a promise: write `yield* until(promise)`"
      : `${typeof value} ${describeThrown(value).slice(0, 40)}: write \`yield*\` (with a star) before an operation`;
  return new KeelError("KEEL_NOT_AN_INSTRUCTION", `a Keel operation yielded ${hint}`);
}

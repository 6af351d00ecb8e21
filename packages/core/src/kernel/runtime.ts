/**
 * The runtime a task tree shares: where its events go.
 * @module
 */
import { KeelError } from "../errors.js";
import { describeThrown } from "../format-value.js";
import type { KeelEvent } from "../observe/events.js";
import { warningEvents } from "../observe/events.js";

/** Where a task tree's events go. */
export interface Runtime {
  emit(event: KeelEvent): void;
  /** True when someone receives every event; otherwise only warnings are worth building. */
  readonly listening: boolean;
}

/**
 * A runtime that hands every event to `onEvent`; without one, warnings (overruns, swallows,
 * abandonments, suppressed errors) go to `console.warn`, so nothing is lost silently.
 */
export function createRuntime(onEvent?: (event: KeelEvent) => void): Runtime {
  return {
    listening: onEvent !== undefined,
    emit(event) {
      if (onEvent) {
        try {
          onEvent(event);
        } catch (e) {
          console.error("keel: an onEvent handler threw", e);
        }
      } else if (warningEvents.has(event.type)) {
        console.warn(`keel: ${event.type} at ${event.path} (t=${event.at})`, describe(event));
      }
    },
  };
}

function describe(event: KeelEvent): string {
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

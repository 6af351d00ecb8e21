/**
 * The runtime a task tree shares: where its events go.
 * @module
 */
import { KeelError } from "../errors.js";
import { describeThrown, printThrown, roundMs } from "../format-value.js";
import type { KeelEvent } from "../observe/events.js";
import { warningEvents } from "../observe/events.js";
import type { AsyncContext } from "./async-context.js";
import { channelsActive, publishEvent } from "./diagnostics.js";

/** Where a task tree's events go, and the async context its tasks' steps run in. */
export interface Runtime {
  emit(event: KeelEvent): void;
  /**
   * True when someone receives every event (`onEvent`, or a subscriber on a Keel diagnostics
   * channel); otherwise only warnings are worth building.
   */
  readonly listening: boolean;
  /** Entered by the scheduler around every step of a task of this runtime (see `async-context.ts`). */
  readonly asyncContext: AsyncContext;
  /** The id of the tree's root task, set when the root is made (events carry it as `rootId`). */
  rootId: number;
}

/**
 * One class for every runtime, so reading `listening` stays monomorphic; `listening` is a getter
 * because a diagnostics channel can gain a subscriber while the tree runs.
 */
class TreeRuntime implements Runtime {
  rootId = 0;
  constructor(
    readonly asyncContext: AsyncContext,
    private readonly onEvent: ((event: KeelEvent) => void) | undefined,
    private readonly origin: number,
    private readonly onWarning: ((event: KeelEvent) => void) | undefined = undefined,
  ) {}

  get listening(): boolean {
    return this.onEvent !== undefined || channelsActive;
  }

  emit(event: KeelEvent): void {
    const onEvent = this.onEvent;
    if (onEvent) {
      try {
        onEvent(event);
      } catch (e) {
        printThrown("keel: an onEvent handler threw", e);
      }
    } else if (this.onWarning && warningEvents.has(event.type)) {
      this.onWarning(event);
    } else if (warningEvents.has(event.type)) {
      const ms = Math.round(event.at - this.origin);
      console.warn(
        `keel: ${event.type} at ${event.path} (${ms} ms after the run started)`,
        describeWarning(event),
      );
    }
    if (channelsActive) publishEvent(event);
  }

  with(asyncContext: AsyncContext): TreeRuntime {
    const r = new TreeRuntime(asyncContext, this.onEvent, this.origin, this.onWarning);
    r.rootId = this.rootId;
    return r;
  }
}

/**
 * A runtime that hands every event to `onEvent` and publishes it on its diagnostics channel when
 * that has a subscriber; without `onEvent`, warnings (overruns, swallows, abandonments, suppressed
 * errors) go to `onWarning` (a run's logger), or else to `console.warn`, so nothing is lost silently. A printed warning gives its time as
 * whole ms since `origin`, the root's start on its clock (a real clock reads a fractional epoch,
 * which nobody can read).
 */
export function createRuntime(
  asyncContext: AsyncContext,
  onEvent?: (event: KeelEvent) => void,
  origin = 0,
  onWarning?: (event: KeelEvent) => void,
): Runtime {
  return new TreeRuntime(asyncContext, onEvent, origin, onWarning);
}

/**
 * The same tree's runtime with another async context: for a task started from a callback
 * (`scope.spawn`), whose steps run in the context in force where it was started.
 */
export function withAsyncContext(runtime: Runtime, asyncContext: AsyncContext): Runtime {
  return (runtime as TreeRuntime).with(asyncContext);
}

/** @internal What a warning says, after its type and path (empty for an event that is not one). */
export function describeWarning(event: KeelEvent): string {
  switch (event.type) {
    case "cleanup:overrun":
      return `cleanup exceeded ${roundMs(event.budgetMs)} ms while waiting on ${event.waitingOn ?? "nothing"}`;
    case "cleanup:abandon":
      return `abandoned while waiting on ${event.waitingOn ?? "nothing"}`;
    case "cleanup:swallow":
      return `a Cancelled (${event.reason.kind}) was swallowed`;
    case "error:suppressed":
      return `${event.context}: ${describeThrown(event.error)}`;
    case "cancel:replaced":
      return `the cancellation (${event.reason.kind}) was replaced by ${describeThrown(event.error)}`;
    case "retry:unreachable":
    case "worker:engine":
      return event.message;
    case "task:blocked":
      return `a step ran ${roundMs(event.durationMs)} ms without yielding, blocking the event loop (threshold ${roundMs(event.thresholdMs)} ms)`;
    case "deadline:missing":
      return `${event.label}: an external call with no deadline of its caller's above it (only its own limits, if any, bound it)`;
    default:
      return "";
  }
}

/** The error thrown into a generator that yielded something that is not an instruction. */
export function notAnInstruction(value: unknown): KeelError {
  const isObject = typeof value === "object" && value !== null;
  // Keel's operations have a `then` (it throws, see not-a-promise.ts): look for an operation first.
  const hint =
    isObject &&
    !Array.isArray(value) &&
    typeof (value as Partial<Iterable<unknown>>)[Symbol.iterator] === "function"
      ? `an operation (${describeThrown(value).slice(0, 40)}): write \`yield*\` (with a star) before it`
      : isObject && typeof (value as PromiseLike<unknown>).then === "function"
        ? "a promise: write `yield* until(promise)`"
        : `${typeof value} ${describeThrown(value).slice(0, 40)}: write \`yield*\` (with a star) before an operation`;
  return new KeelError("KEEL_NOT_AN_INSTRUCTION", `a Keel operation yielded ${hint}`);
}

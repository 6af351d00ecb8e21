/**
 * The narrator every scenario shares: a fresh virtual clock, a trace of lines stamped with virtual
 * time, and an `onEvent` that turns runtime events into lines of the same trace.
 * @module
 */
import type { KeelEvent } from "@keel/core";
import { createVirtualClock, type VirtualClock } from "@keel/testing";

/** What a scenario returns: its trace, and the facts the demo test pins. */
export interface ScenarioResult<F> {
  readonly title: string;
  readonly lines: readonly string[];
  readonly facts: F;
  /** The leak check: tasks started and not settled, timers still pending. Both must be 0. */
  readonly leftover: { readonly liveTasks: number; readonly pendingTimers: number };
}

export interface Narration {
  readonly title: string;
  /** Starts at t=0 and jumps to the next timer whenever every task waits, so scenarios are instant. */
  readonly clock: VirtualClock;
  readonly lines: string[];
  readonly events: KeelEvent[];
  /** Appends `[t=<now>ms] text`. */
  say(text: string): void;
  /** Pass as `run(op, { onEvent })`: records the event and narrates it. */
  readonly onEvent: (event: KeelEvent) => void;
  /** Packs the trace and the leak check with the scenario's facts. */
  finish<F>(facts: F): ScenarioResult<F>;
}

export function createNarration(title: string): Narration {
  const clock = createVirtualClock();
  const lines: string[] = [];
  const events: KeelEvent[] = [];
  const live = new Set<number>();
  const say = (text: string) => {
    lines.push(`[t=${clock.now()}ms] ${text}`);
  };
  return {
    title,
    clock,
    lines,
    events,
    say,
    onEvent(event) {
      events.push(event);
      if (event.type === "task:start") live.add(event.taskId);
      if (event.type === "task:settle") live.delete(event.taskId);
      // Stamped with the event's own time, which is the clock's time when it happened.
      lines.push(`[t=${event.at}ms]   · ${describeEvent(event)}`);
    },
    finish: (facts) => ({
      title,
      lines: [...lines],
      facts,
      leftover: { liveTasks: live.size, pendingTimers: clock.pendingTimers },
    }),
  };
}

/** A task's path without ids (`service/writer`): ids depend on what ran before, names do not. */
function who(event: KeelEvent): string {
  return event.path.replace(/#\d+/g, "");
}

function describeEvent(e: KeelEvent): string {
  switch (e.type) {
    case "task:start":
      return `${who(e)} starts`;
    case "task:settle":
      if (e.state === "cancelled") return `${who(e)} settles cancelled (${e.reason?.kind ?? "?"})`;
      if (e.state === "failed") return `${who(e)} settles failed (${String(e.error)})`;
      return `${who(e)} settles completed`;
    case "cancel:request":
      return `cancellation requested in ${who(e)}: ${e.reason.kind}, by ${e.owner === "outside" ? "a request from outside" : e.owner.label}`;
    case "timeout:fire":
      return `${e.scope.label} fired in ${who(e)}`;
    case "timeout:superseded":
      return `${e.scope.label} in ${who(e)} stays silent: an enclosing claim wins`;
    case "cleanup:overrun":
      return `cleanup:overrun in ${who(e)}: over its ${e.budgetMs}ms budget, cut while waiting on ${e.waitingOn ?? "nothing"}`;
    case "cleanup:swallow":
      return `${who(e)} swallowed its cancellation (${e.reason.kind}); reported, outcome unchanged`;
    case "cleanup:abandon":
      return `${who(e)} abandoned while waiting on ${e.waitingOn ?? "nothing"}`;
    case "shield:delay":
      return `shield:delay in ${who(e)}: the ${e.reason.kind} was held back ${e.delayedMs}ms by a shield`;
    case "error:suppressed":
      return `error kept as suppressed in ${who(e)}: ${String(e.error)} (${e.context})`;
    case "cancel:replaced":
      return `${who(e)}: the ${e.reason.kind} was replaced by ${String(e.error)}`;
    default:
      // Retry, HTTP and breaker events: none of these scenarios raises them.
      return `${e.type} in ${who(e)}`;
  }
}

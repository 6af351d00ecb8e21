/**
 * The body's durable operations besides steps: sleeps (rule W6), events (rule W8), the journaled
 * clock and randomness (rule W7), and `patched` for changing a workflow under running executions.
 * @module
 */
import { type Operation, random as runtimeRandom, type Task, TimeoutError, useTask } from "@keel/core";
import { checkMs, invalidRange, invalidType } from "./checks.js";
import { CURRENT, incarnationOf } from "./current.js";
import { DurableWait } from "./durable-wait.js";
import { NotInWorkflowError } from "./errors.js";
import type { Incarnation } from "./incarnation.js";
import { journalError, restoreError } from "./json.js";
import { beginNew } from "./step.js";
import type { JournalEntry, JsonValue, SignalRecord } from "./store/store.js";

function* incarnation(api: string): Generator<unknown, [Incarnation, Task<unknown>], unknown> {
  const inc = incarnationOf(yield* CURRENT.get());
  if (inc === null) throw new NotInWorkflowError(api);
  return [inc, yield* useTask()];
}

/** Writes entries from the body: a wait until they are journaled (forever, if the claim is lost). */
function journal(inc: Incarnation, entries: JournalEntry[]): DurableWait<void> {
  return new DurableWait<void>(`writing ${entries[0]!.key} to the journal`, (resolve) => {
    inc.write(entries).then(
      () => resolve({ ok: true, value: undefined }),
      () => {},
    );
    return undefined;
  });
}

function entry(key: string, kind: JournalEntry["kind"], value: JsonValue, at: number): JournalEntry {
  return { key, kind, ok: true, value, error: null, attempts: 0, startedAt: at, endedAt: at };
}

/**
 * A durable sleep for `ms` (rule W6): the instant it ends is journaled the first time, so a restart
 * resumes at the same instant; a body that sleeps long is parked (its slot and memory freed).
 *
 * @example
 * ```ts
 * import { sleepFor, workflow } from "@keel/workflow";
 * const reminder = workflow("reminder", function* () {
 *   yield* sleepFor(3 * 24 * 3600_000); // three days, across any number of restarts
 * });
 * console.log(reminder.name); // reminder
 * ```
 */
export function sleepFor(ms: number): Operation<void> {
  checkMs("sleepFor(ms)", ms, { allowInfinity: false });
  return sleepAt((now) => now + ms, `sleepFor(${ms})`);
}

/**
 * A durable sleep until `instant` (ms since the epoch, or a `Date`), as {@link sleepFor}.
 *
 * @example
 * ```ts
 * import { sleepUntil, workflow } from "@keel/workflow";
 * const newYear = workflow("new-year", function* () { yield* sleepUntil(new Date("2027-01-01T00:00:00Z")); });
 * console.log(newYear.version); // 1
 * ```
 */
export function sleepUntil(instant: number | Date): Operation<void> {
  const at = instant instanceof Date ? instant.getTime() : instant;
  if (typeof at !== "number" || !Number.isFinite(at))
    throw invalidType(
      "sleepUntil(instant)",
      "a finite number of ms since the epoch, or a valid Date",
      instant,
    );
  return sleepAt(() => at, "sleepUntil");
}

function sleepAt(wakeAtFrom: (now: number) => number, api: string): Operation<void> {
  return {
    *[Symbol.iterator]() {
      const [inc, task] = yield* incarnation(api);
      const key = inc.key("sleep", task, "");
      const found = yield* inc.take(key);
      let wakeAt: number;
      if (found) wakeAt = (found.value as { wakeAt: number }).wakeAt;
      else {
        yield* beginNew(inc, key);
        const now = inc.clock.now();
        wakeAt = wakeAtFrom(now);
        yield* journal(inc, [entry(key, "sleep", { wakeAt }, now)]);
      }
      if (wakeAt <= inc.clock.now()) return;
      const description = `sleep until ${new Date(wakeAt).toISOString()}`;
      yield* new DurableWait<void>(description, (resolve) => {
        const remove = inc.waits.add({ kind: "sleep", key, dueAt: wakeAt, description });
        const cancel = inc.clock.schedule(wakeAt, () => {
          if (inc.state === "running") resolve({ ok: true, value: undefined });
        });
        return () => {
          cancel();
          remove();
        };
      });
    },
  };
}

/**
 * Waits for the event `name` sent with `engine.signal(executionId, name, payload)` (rule W8) and
 * returns its payload. A signal sent before the wait is kept for it; the waits for one name take
 * its signals in the order they were sent. With `timeoutMs`, a `TimeoutError` is thrown at the wait
 * when none comes in time (the body can catch it); the timeout's instant is journaled.
 *
 * @example
 * ```ts
 * import { isTimeoutError } from "@keel/core";
 * import { waitForEvent, workflow } from "@keel/workflow";
 * const approval = workflow("approval", function* () {
 *   try {
 *     return yield* waitForEvent<{ by: string }>("approved", { timeoutMs: 86_400_000 });
 *   } catch (e) {
 *     if (isTimeoutError(e)) return { by: "nobody" };
 *     throw e;
 *   }
 * });
 * console.log(approval.name); // approval
 * ```
 */
export function waitForEvent<T = unknown>(name: string, options: { timeoutMs?: number } = {}): Operation<T> {
  if (typeof name !== "string" || name.length === 0 || name.length > 200 || /[#/]/.test(name))
    throw invalidType(
      "waitForEvent(name)",
      "a non-empty string of at most 200 characters, without # or /",
      name,
    );
  if (typeof options !== "object" || options === null)
    throw invalidType("waitForEvent(name, options)", "an object", options);
  const { timeoutMs } = options;
  if (timeoutMs !== undefined)
    checkMs("waitForEvent(name, { timeoutMs })", timeoutMs, { allowInfinity: false });
  return {
    *[Symbol.iterator]() {
      const [inc, task] = yield* incarnation(`waitForEvent("${name}")`);
      const key = inc.key("event", task, name);
      // In the journal's order: the timeout's instant (written when the wait began), then the outcome.
      const begun = yield* inc.take(`${key}:timeout`);
      const found = yield* inc.take(key);
      if (found) {
        if (!found.ok) throw restoreError(found.error!);
        return (found.value as { payload: JsonValue }).payload as T;
      }
      yield* beginNew(inc, key);
      let timeoutAt = begun ? (begun.value as { timeoutAt: number }).timeoutAt : undefined;
      if (!begun && timeoutMs !== undefined) {
        const now = inc.clock.now();
        timeoutAt = now + timeoutMs;
        yield* journal(inc, [entry(`${key}:timeout`, "event", { timeoutAt }, now)]);
      }
      // Read in the task tree and kept as a parked execution's `waitingOn`: `event "approved"
      // (timeout at 2026-12-07T09:00:00.000Z)`; "until" would read as how long the wait has lasted.
      const description = `event "${name}"${timeoutAt === undefined ? "" : ` (timeout at ${new Date(timeoutAt).toISOString()})`}`;
      const startedAt = inc.clock.now();
      return (yield* new DurableWait<T>(description, (resolve) => {
        let done = false;
        let cancelTimer: (() => void) | null = null;
        const finish = (e: JournalEntry) => {
          done = true;
          remove();
          cancelTimer?.();
          inc.write([e]).then(
            () => {
              inc.checkSoon();
              resolve(
                e.ok
                  ? { ok: true, value: (e.value as { payload: T }).payload }
                  : { ok: false, error: restoreError(e.error!) },
              );
            },
            () => {},
          );
        };
        const offer = (s: SignalRecord): boolean => {
          if (done) return false;
          finish({
            ...entry(key, "event", { payload: s.payload, signal: s.seq }, inc.clock.now()),
            startedAt,
          });
          return true;
        };
        const remove = inc.waits.add({
          kind: "event",
          key,
          name,
          dueAt: timeoutAt ?? Infinity,
          description,
          offer,
        });
        const ready = inc.waits.takeSignal(name);
        if (ready) offer(ready);
        else if (timeoutAt !== undefined) {
          const at = timeoutAt;
          cancelTimer = inc.clock.schedule(at, () => {
            if (done || inc.state !== "running") return;
            const error = new TimeoutError({
              timeoutMs: timeoutMs ?? at - startedAt,
              deadline: at,
              elapsedMs: inc.clock.now() - startedAt,
              label: `waitForEvent("${name}")`,
              message: `waitForEvent("${name}"): no event within its timeout`,
            });
            finish({
              key,
              kind: "event",
              ok: false,
              value: null,
              error: journalError(error),
              attempts: 0,
              startedAt,
              endedAt: at,
            });
          });
        }
        return () => {
          done = true;
          remove();
          cancelTimer?.();
        };
      })) as T;
    },
  };
}

/**
 * The workflow's clock (rule W7): the engine clock's time when first asked, journaled, so a replay
 * reads the same instant. Use it in the body instead of `Date.now()` or Keel's `now()`.
 *
 * @example
 * ```ts
 * import { now, workflow } from "@keel/workflow";
 * const stamp = workflow("stamp", function* () { return new Date(yield* now()).toISOString(); });
 * console.log(stamp.name); // stamp
 * ```
 */
export function now(): Operation<number> {
  return journaledNumber("now", (inc) => inc.clock.now());
}

/**
 * The workflow's randomness (rule W7): a number in [0, 1) from the runtime's random source,
 * journaled, so a replay reads the same one.
 *
 * @example
 * ```ts
 * import { random, workflow } from "@keel/workflow";
 * const coin = workflow("coin", function* () { return (yield* random()) < 0.5 ? "heads" : "tails"; });
 * console.log(coin.name); // coin
 * ```
 */
export function random(): Operation<number> {
  return journaledNumber("random", null);
}

function journaledNumber(
  kind: "now" | "random",
  read: ((inc: Incarnation) => number) | null,
): Operation<number> {
  return {
    *[Symbol.iterator]() {
      const [inc, task] = yield* incarnation(`${kind}()`);
      const key = inc.key(kind, task, "");
      const found = yield* inc.take(key);
      if (found) return found.value as number;
      yield* beginNew(inc, key);
      const value = read ? read(inc) : yield* runtimeRandom();
      yield* journal(inc, [entry(key, kind, value, inc.clock.now())]);
      return value;
    },
  };
}

/**
 * Whether this execution takes the new path of a change made under running executions: true for
 * an execution that reaches `patched(id)` for the first time outside a replay (a new one, or one
 * that had not yet got this far), false for one whose journal already ran past this point on the
 * old code. The answer is journaled, so it never changes for an execution.
 *
 * @example
 * ```ts
 * import { patched, step, workflow } from "@keel/workflow";
 * const ship = workflow("ship", function* () {
 *   if (yield* patched("insure-parcels")) yield* step("insure", function* () { return "insured"; });
 *   return yield* step("ship", function* () { return "shipped"; });
 * });
 * console.log(ship.name); // ship
 * ```
 */
export function patched(id: string): Operation<boolean> {
  if (typeof id !== "string" || id.length === 0 || id.length > 200)
    throw invalidRange("patched(id)", "a non-empty string of at most 200 characters", id);
  return {
    *[Symbol.iterator]() {
      const [inc] = yield* incarnation(`patched("${id}")`);
      const key = `patch:${id}`;
      const found = inc.answered(key) ?? (yield* inc.take(key));
      if (found) return found.value as boolean;
      const answer = !inc.replaying;
      const e = entry(key, "patch", answer, inc.clock.now());
      inc.remember(e);
      yield* journal(inc, [e]);
      return answer;
    },
  };
}

/**
 * What {@link executionInfo} gives: the running execution's identity.
 *
 * @example
 * ```ts
 * import type { ExecutionInfo } from "@keel/workflow";
 * const info: ExecutionInfo = { id: "order-7", workflow: "checkout", version: 1, deadlineAt: null };
 * console.log(`${info.workflow}@${info.version} ${info.id}`); // checkout@1 order-7
 * ```
 */
export interface ExecutionInfo {
  readonly id: string;
  readonly workflow: string;
  readonly version: number;
  /** Its absolute deadline, or null. */
  readonly deadlineAt: number | null;
}

/**
 * In a workflow's body: the execution it runs (its id, for logs and for the keys of what it starts).
 *
 * @example
 * ```ts
 * import { executionInfo, workflow } from "@keel/workflow";
 * const whoAmI = workflow("who-am-i", function* () { return (yield* executionInfo()).id; });
 * console.log(whoAmI.name); // who-am-i
 * ```
 */
export function executionInfo(): Operation<ExecutionInfo> {
  return {
    *[Symbol.iterator]() {
      const [inc] = yield* incarnation("executionInfo()");
      const r = inc.record;
      return { id: r.id, workflow: r.workflow, version: r.version, deadlineAt: r.deadlineAt };
    },
  };
}

/**
 * `retry` under every combination of its own budget, the per-attempt timeout and an enclosing
 * timeout, with exact virtual attempt times; its callbacks and events; and its bad input.
 */
import {
  constant,
  type GiveUpReason,
  isCancelled,
  isTimeoutError,
  type Operation,
  RetryExhaustedError,
  type RetryInfo,
  type RetryPolicy,
  retry,
  sleep,
  suspend,
  type Task,
  TaskCancelledError,
  TimeoutError,
  timeout,
  timeoutAt,
  withRandom,
} from "@keel/core";
import { createHarness, type Harness } from "@keel/testing";
import { describe, expect, it, vi } from "vitest";

function busy(): Error & { status: number } {
  return Object.assign(new Error("HTTP 503"), { name: "HttpError", status: 503 });
}

interface Attempts {
  /** When each attempt started. */
  readonly starts: number[];
  /** The errors the attempts threw themselves, in order. */
  readonly thrown: unknown[];
}

/** An attempt that works for 300 ms and then fails with a transient 503. */
function working(h: Harness, log: Attempts) {
  return function* work(): Operation<string> {
    log.starts.push(h.clock.now());
    yield* sleep(300);
    const e = busy();
    log.thrown.push(e);
    throw e;
  };
}

/** An attempt that never settles. */
function hanging(h: Harness, log: Attempts) {
  return function* hang(): Operation<string> {
    log.starts.push(h.clock.now());
    return yield* suspend();
  };
}

/** How a row of the matrix ends. */
type End =
  /** `RetryExhaustedError` with this reason; its cause is the last attempt's own error, or a TimeoutError. */
  | { exhausted: GiveUpReason; cause: "last" | { timeoutMs: number } }
  /** The enclosing timeout's own `TimeoutError`, the loop having seen `Cancelled`. */
  | "outer";

interface Row {
  name: string;
  policy: Pick<RetryPolicy, "attempts" | "budgetMs" | "perAttemptMs">;
  /** An enclosing deadline at this instant, tested as `timeout(d)` and as `timeoutAt(d)`. */
  enclosing?: number;
  op: "work" | "hang";
  starts: number[];
  at: number;
  end: End;
  sleeps: number;
  /** `availableMs` of the one `retry:unreachable` warning, when one is due. */
  unreachable?: number;
}

// Backoff constant(100), 4 attempts unless a row says otherwise. "work" = 300 ms then a 503.
const rows: Row[] = [
  {
    name: "with no limit, all 4 attempts run and RetryExhaustedError(attempts) comes at 1500",
    policy: {},
    op: "work",
    starts: [0, 400, 800, 1200],
    at: 1500,
    end: { exhausted: "attempts", cause: "last" },
    sleeps: 3,
  },
  {
    name: "a per-attempt limit shorter than the work times every attempt out, and each timeout is retried",
    policy: { perAttemptMs: 200 },
    op: "work",
    starts: [0, 300, 600, 900],
    at: 1100,
    end: { exhausted: "attempts", cause: { timeoutMs: 200 } },
    sleeps: 3,
  },
  {
    name: "a per-attempt limit longer than the work never fires",
    policy: { perAttemptMs: 500 },
    op: "work",
    starts: [0, 400, 800, 1200],
    at: 1500,
    end: { exhausted: "attempts", cause: "last" },
    sleeps: 3,
  },
  {
    name: "a budget alone cuts the attempt in flight: RetryExhaustedError(budget) caused by the budget's timeout",
    policy: { budgetMs: 1000 },
    op: "work",
    starts: [0, 400, 800],
    at: 1000,
    end: { exhausted: "budget", cause: { timeoutMs: 1000 } },
    sleeps: 2,
  },
  {
    name: "a budget that the next sleep would cross gives up before sleeping, caused by the last error",
    policy: { budgetMs: 750 },
    op: "work",
    starts: [0, 400],
    at: 700,
    end: { exhausted: "budget", cause: "last" },
    sleeps: 1,
  },
  {
    name: "a sleep that would end exactly at the budget is not started",
    policy: { budgetMs: 800 },
    op: "work",
    starts: [0, 400],
    at: 700,
    end: { exhausted: "budget", cause: "last" },
    sleeps: 1,
  },
  {
    name: "a sleep that ends 1 ms before the budget is started, and the budget cuts the next attempt",
    policy: { budgetMs: 801 },
    op: "work",
    starts: [0, 400, 800],
    at: 801,
    end: { exhausted: "budget", cause: { timeoutMs: 801 } },
    sleeps: 2,
  },
  {
    name: "attempts run out well within the budget",
    policy: { perAttemptMs: 200, budgetMs: 10_000 },
    op: "work",
    starts: [0, 300, 600, 900],
    at: 1100,
    end: { exhausted: "attempts", cause: { timeoutMs: 200 } },
    sleeps: 3,
  },
  {
    name: "per-attempt < budget: the last attempt is clamped to the budget, which wins at 1000",
    policy: { perAttemptMs: 200, budgetMs: 1000, attempts: 10 },
    op: "work",
    starts: [0, 300, 600, 900],
    at: 1000,
    end: { exhausted: "budget", cause: { timeoutMs: 1000 } },
    sleeps: 3,
  },
  {
    name: "budget < per-attempt (inverted): one attempt, cut by the budget, and a warning at 0",
    policy: { perAttemptMs: 2000, budgetMs: 1000, attempts: 3 },
    op: "hang",
    starts: [0],
    at: 1000,
    end: { exhausted: "budget", cause: { timeoutMs: 1000 } },
    sleeps: 0,
    unreachable: 1000,
  },
  {
    name: "per-attempt equal to the budget leaves no room for a retry: a warning, and the budget ends it",
    policy: { perAttemptMs: 1000, budgetMs: 1000, attempts: 3 },
    op: "hang",
    starts: [0],
    at: 1000,
    end: { exhausted: "budget", cause: { timeoutMs: 1000 } },
    sleeps: 0,
    unreachable: 1000,
  },
  {
    name: "an enclosing deadline alone cuts the attempt in flight and its own TimeoutError wins",
    policy: {},
    enclosing: 1000,
    op: "work",
    starts: [0, 400, 800],
    at: 1000,
    end: "outer",
    sleeps: 2,
  },
  {
    name: "an enclosing deadline that the next sleep would cross gives up with reason deadline",
    policy: {},
    enclosing: 750,
    op: "work",
    starts: [0, 400],
    at: 700,
    end: { exhausted: "deadline", cause: "last" },
    sleeps: 1,
  },
  {
    name: "per-attempt < deadline: timed-out attempts are retried until the deadline, which wins",
    policy: { perAttemptMs: 500, attempts: 10 },
    enclosing: 2000,
    op: "hang",
    starts: [0, 600, 1200, 1800],
    at: 2000,
    end: "outer",
    sleeps: 3,
  },
  {
    name: "deadline < per-attempt (inverted): one attempt, a warning at 0, and the deadline wins",
    policy: { perAttemptMs: 2000, attempts: 3 },
    enclosing: 1000,
    op: "hang",
    starts: [0],
    at: 1000,
    end: "outer",
    sleeps: 0,
    unreachable: 1000,
  },
  {
    name: "budget < deadline: the budget cuts the attempt in flight",
    policy: { budgetMs: 1000 },
    enclosing: 2000,
    op: "work",
    starts: [0, 400, 800],
    at: 1000,
    end: { exhausted: "budget", cause: { timeoutMs: 1000 } },
    sleeps: 2,
  },
  {
    name: "deadline < budget: the deadline cuts the attempt in flight and wins",
    policy: { budgetMs: 2000 },
    enclosing: 1000,
    op: "work",
    starts: [0, 400, 800],
    at: 1000,
    end: "outer",
    sleeps: 2,
  },
  {
    name: "budget equal to the deadline: the two expire together and the outer wins",
    policy: { budgetMs: 1000 },
    enclosing: 1000,
    op: "work",
    starts: [0, 400, 800],
    at: 1000,
    end: "outer",
    sleeps: 2,
  },
  {
    name: "budget < deadline: a sleep crossing the budget gives up with reason budget",
    policy: { budgetMs: 750 },
    enclosing: 2000,
    op: "work",
    starts: [0, 400],
    at: 700,
    end: { exhausted: "budget", cause: "last" },
    sleeps: 1,
  },
  {
    name: "deadline < budget: a sleep crossing the deadline gives up with reason deadline",
    policy: { budgetMs: 2000 },
    enclosing: 750,
    op: "work",
    starts: [0, 400],
    at: 700,
    end: { exhausted: "deadline", cause: "last" },
    sleeps: 1,
  },
  {
    name: "per-attempt < budget < deadline: the budget wins at 1000",
    policy: { perAttemptMs: 200, budgetMs: 1000, attempts: 10 },
    enclosing: 2000,
    op: "work",
    starts: [0, 300, 600, 900],
    at: 1000,
    end: { exhausted: "budget", cause: { timeoutMs: 1000 } },
    sleeps: 3,
  },
  {
    name: "per-attempt < deadline < budget: the deadline wins at 1000",
    policy: { perAttemptMs: 200, budgetMs: 2000, attempts: 10 },
    enclosing: 1000,
    op: "work",
    starts: [0, 300, 600, 900],
    at: 1000,
    end: "outer",
    sleeps: 3,
  },
  {
    name: "budget < per-attempt < deadline: one attempt, a warning, the budget ends it",
    policy: { perAttemptMs: 1500, budgetMs: 1000, attempts: 3 },
    enclosing: 2000,
    op: "hang",
    starts: [0],
    at: 1000,
    end: { exhausted: "budget", cause: { timeoutMs: 1000 } },
    sleeps: 0,
    unreachable: 1000,
  },
  {
    name: "budget < deadline < per-attempt: one attempt, a warning, the budget ends it",
    policy: { perAttemptMs: 3000, budgetMs: 1000, attempts: 3 },
    enclosing: 2000,
    op: "hang",
    starts: [0],
    at: 1000,
    end: { exhausted: "budget", cause: { timeoutMs: 1000 } },
    sleeps: 0,
    unreachable: 1000,
  },
  {
    name: "deadline < per-attempt < budget: one attempt, a warning, the deadline wins",
    policy: { perAttemptMs: 1500, budgetMs: 3000, attempts: 3 },
    enclosing: 1000,
    op: "hang",
    starts: [0],
    at: 1000,
    end: "outer",
    sleeps: 0,
    unreachable: 1000,
  },
  {
    name: "deadline < budget < per-attempt: one attempt, a warning, the deadline wins",
    policy: { perAttemptMs: 2000, budgetMs: 1500, attempts: 3 },
    enclosing: 1000,
    op: "hang",
    starts: [0],
    at: 1000,
    end: "outer",
    sleeps: 0,
    unreachable: 1000,
  },
];

const enclosings = [
  ["timeout", (d: number) => `timeout(${d})`, <T>(d: number, op: Operation<T>) => timeout(d, op)],
  ["timeoutAt", (d: number) => `timeoutAt(${d})`, <T>(d: number, op: Operation<T>) => timeoutAt(d, op)],
] as const;

interface Observed {
  error: unknown;
  at: number;
  timers: number;
  /** What propagated out of `retry` itself. */
  fromRetry: unknown;
  countAfter: number;
}

describe("retry under budgets, per-attempt limits and enclosing deadlines", () => {
  for (const row of rows) {
    const forms =
      row.enclosing === undefined
        ? [null]
        : enclosings.map(([kind, label, wrap]) => ({ kind, label: label(row.enclosing!), wrap }));
    for (const form of forms) {
      const title = form === null ? row.name : `${row.name} (under ${form.label})`;
      it(title, async () => {
        const h = createHarness();
        const log: Attempts = { starts: [], thrown: [] };
        const retries: RetryInfo[] = [];
        const op = row.op === "work" ? working(h, log) : hanging(h, log);
        const looped: Operation<string> = {
          *[Symbol.iterator]() {
            try {
              return yield* retry(op, {
                backoff: constant(100),
                attempts: 4,
                ...row.policy,
                onRetry: (i) => retries.push(i),
              });
            } catch (e) {
              observed.fromRetry = e;
              throw e;
            }
          },
        };
        const observed: Observed = {
          error: undefined,
          at: -1,
          timers: -1,
          fromRetry: undefined,
          countAfter: -1,
        };
        const task: Task<void> = h.run(function* caller() {
          try {
            yield* form === null ? looped : form.wrap(row.enclosing!, looped);
            throw new Error("the loop returned a value");
          } catch (e) {
            Object.assign(observed, {
              error: e,
              at: h.clock.now(),
              timers: h.clock.pendingTimers,
              countAfter: task.cancellationCount,
            });
          }
        });

        await task;

        expect(log.starts).toEqual(row.starts);
        expect(h.eventsOf("retry:attempt").map((e) => e.at)).toEqual(row.starts);
        expect({ at: observed.at, timers: observed.timers, countAfter: observed.countAfter }).toEqual({
          at: row.at,
          timers: 0,
          countAfter: 0,
        });
        if (row.end === "outer") {
          expect(observed.error).toBeInstanceOf(TimeoutError);
          expect(observed.error).toMatchObject({ deadline: row.enclosing, label: form!.label });
          expect(isCancelled(observed.fromRetry)).toBe(true);
          expect(h.eventsOf("retry:giveup")).toHaveLength(0);
        } else {
          const e = observed.error as RetryExhaustedError;
          expect(e).toBeInstanceOf(RetryExhaustedError);
          expect(observed.fromRetry).toBe(e);
          expect({ reason: e.reason, attempts: e.attempts, elapsedMs: e.elapsedMs }).toEqual({
            reason: row.end.exhausted,
            attempts: row.starts.length,
            elapsedMs: row.at,
          });
          if (row.end.cause === "last") {
            expect(e.cause).toBe(log.thrown.at(-1));
          } else {
            expect(isTimeoutError(e.cause)).toBe(true);
            expect(e.cause).toMatchObject({ timeoutMs: row.end.cause.timeoutMs });
          }
          expect(h.eventsOf("retry:giveup").map((g) => [g.at, g.reason])).toEqual([
            [row.at, row.end.exhausted],
          ]);
        }
        expect(retries).toHaveLength(row.sleeps);
        expect(h.eventsOf("retry:sleep")).toHaveLength(row.sleeps);
        const warnings = h.eventsOf("retry:unreachable");
        if (row.unreachable === undefined) {
          expect(warnings).toHaveLength(0);
        } else {
          expect(warnings.map((w) => [w.at, w.perAttemptMs, w.availableMs])).toEqual([
            [0, row.policy.perAttemptMs, row.unreachable],
          ]);
        }
        await h.expectClean();
      });
    }
  }

  it("attempts: Infinity keeps retrying until the budget leaves no room for the next sleep", async () => {
    const h = createHarness();
    const log: Attempts = { starts: [], thrown: [] };

    const error = await h
      .run(() => retry(working(h, log), { attempts: Infinity, budgetMs: 2000, backoff: constant(100) }))
      .then(
        () => null,
        (e: unknown) => e,
      );

    expect(log.starts).toEqual([0, 400, 800, 1200, 1600]);
    expect(error).toBeInstanceOf(RetryExhaustedError);
    expect(error).toMatchObject({ reason: "budget", attempts: 5, elapsedMs: 1900 });
    expect((error as RetryExhaustedError).cause).toBe(log.thrown[4]);
    await h.expectClean();
  });

  it("budgetMs: Infinity is no budget at all", async () => {
    const h = createHarness();
    const log: Attempts = { starts: [], thrown: [] };

    const error = await h
      .run(() => retry(working(h, log), { attempts: 3, budgetMs: Infinity, backoff: constant(100) }))
      .then(
        () => null,
        (e: unknown) => e,
      );

    expect(log.starts).toEqual([0, 400, 800]);
    expect(error).toMatchObject({ reason: "attempts", attempts: 3, elapsedMs: 1100 });
    await h.expectClean();
  });

  it("a spent budget (budgetMs: 0) starts no attempt", async () => {
    const h = createHarness();
    const log: Attempts = { starts: [], thrown: [] };

    const error = await h
      .run(() => retry(working(h, log), { budgetMs: 0, backoff: constant(100) }))
      .then(
        () => null,
        (e: unknown) => e,
      );

    expect(log.starts).toEqual([]);
    expect(h.eventsOf("retry:attempt")).toHaveLength(0);
    expect(error).toBeInstanceOf(RetryExhaustedError);
    expect(error).toMatchObject({ reason: "budget", attempts: 0 });
    await h.expectClean();
  });
});

describe("retry outcomes, callbacks and events", () => {
  it("a later success returns its value, with no give-up", async () => {
    const h = createHarness();
    let calls = 0;

    const value = await h.run(() =>
      retry(
        function* flaky() {
          calls++;
          yield* sleep(10);
          if (calls < 3) throw busy();
          return `ok after ${calls}`;
        },
        { attempts: 5, backoff: constant(100) },
      ),
    );

    expect(value).toBe("ok after 3");
    expect(h.clock.now()).toBe(230);
    expect(h.eventsOf("retry:attempt").map((e) => [e.attempt, e.at])).toEqual([
      [1, 0],
      [2, 110],
      [3, 220],
    ]);
    expect(h.eventsOf("retry:sleep")).toHaveLength(2);
    expect(h.eventsOf("retry:giveup")).toHaveLength(0);
    await h.expectClean();
  });

  it("onRetry and the events say which attempt failed, how, when and how long the loop will wait", async () => {
    const h = createHarness();
    const log: Attempts = { starts: [], thrown: [] };
    const retries: RetryInfo[] = [];

    const error = await h
      .run(() =>
        retry(working(h, log), { attempts: 3, backoff: constant(100), onRetry: (i) => retries.push(i) }),
      )
      .then(
        () => null,
        (e: unknown) => e,
      );

    expect(retries).toEqual([
      {
        attempt: 1,
        elapsedMs: 300,
        timedOut: false,
        error: log.thrown[0],
        delayMs: 100,
        delayReason: "backoff",
      },
      {
        attempt: 2,
        elapsedMs: 700,
        timedOut: false,
        error: log.thrown[1],
        delayMs: 100,
        delayReason: "backoff",
      },
    ]);
    expect(retries[0]!.error).toBe(log.thrown[0]);
    expect(h.eventsOf("retry:attempt").map((e) => [e.attempt, e.at])).toEqual([
      [1, 0],
      [2, 400],
      [3, 800],
    ]);
    const sleeps = h.eventsOf("retry:sleep");
    expect(sleeps.map((e) => [e.attempt, e.at, e.delayMs, e.delayReason])).toEqual([
      [1, 300, 100, "backoff"],
      [2, 700, 100, "backoff"],
    ]);
    expect(sleeps[1]!.error).toBe(log.thrown[1]);
    const giveups = h.eventsOf("retry:giveup");
    expect(giveups.map((e) => [e.attempt, e.at, e.reason, e.delayMs])).toEqual([[3, 1100, "attempts", null]]);
    expect(giveups[0]!.error).toBe(log.thrown[2]);
    expect(error).toMatchObject({ reason: "attempts", attempts: 3 });
    await h.expectClean();
  });

  it("onRetry marks an attempt ended by its own per-attempt timeout as timedOut", async () => {
    const h = createHarness();
    const log: Attempts = { starts: [], thrown: [] };
    const retries: RetryInfo[] = [];

    await h
      .run(() =>
        retry(working(h, log), {
          attempts: 2,
          perAttemptMs: 200,
          backoff: constant(100),
          onRetry: (i) => retries.push(i),
        }),
      )
      .then(
        () => null,
        () => null,
      );

    expect(
      retries.map((i) => [i.attempt, i.elapsedMs, i.timedOut, (i.error as TimeoutError).timeoutMs]),
    ).toEqual([[1, 200, true, 200]]);
    await h.expectClean();
  });

  it("a TimeoutError raised inside the attempt by its own timeout is retried, and is not marked timedOut", async () => {
    const h = createHarness();
    const retries: RetryInfo[] = [];
    let calls = 0;

    const value = await h.run(() =>
      retry(
        function* attempt() {
          calls++;
          if (calls === 1) yield* timeout(50, suspend);
          return "second";
        },
        { attempts: 3, perAttemptMs: 1000, backoff: constant(100), onRetry: (i) => retries.push(i) },
      ),
    );

    expect(value).toBe("second");
    expect(
      retries.map((i) => [i.attempt, i.elapsedMs, i.timedOut, (i.error as TimeoutError).timeoutMs]),
    ).toEqual([[1, 50, false, 50]]);
    expect(h.clock.now()).toBe(150);
    await h.expectClean();
  });

  it("retryOn sees each failure with its attempt info; a false propagates the error unchanged at once", async () => {
    const h = createHarness();
    const log: Attempts = { starts: [], thrown: [] };
    const asked: Array<[unknown, number, number, boolean]> = [];

    const error = await h
      .run(() =>
        retry(working(h, log), {
          attempts: 5,
          backoff: constant(100),
          retryOn: (e, info) => {
            asked.push([e, info.attempt, info.elapsedMs, info.timedOut]);
            return info.attempt < 2;
          },
        }),
      )
      .then(
        () => null,
        (e: unknown) => e,
      );

    expect(log.starts).toEqual([0, 400]);
    expect(asked).toEqual([
      [log.thrown[0], 1, 300, false],
      [log.thrown[1], 2, 700, false],
    ]);
    expect(error).toBe(log.thrown[1]);
    expect(h.clock.now()).toBe(700);
    expect(h.eventsOf("retry:sleep")).toHaveLength(1);
    expect(h.eventsOf("retry:giveup").map((e) => [e.at, e.reason, e.delayMs])).toEqual([
      [700, "not-retryable", null],
    ]);
    await h.expectClean();
  });

  it("a non-transient error is not retried by default, at any attempt", async () => {
    const h = createHarness();
    let calls = 0;
    const fatal = new TypeError("x is undefined");

    const error = await h
      .run(() =>
        retry(
          function* attempt() {
            calls++;
            if (calls < 3) throw busy();
            throw fatal;
          },
          { attempts: 5, backoff: constant(100) },
        ),
      )
      .then(
        () => null,
        (e: unknown) => e,
      );

    expect(error).toBe(fatal);
    expect(calls).toBe(3);
    expect(h.clock.now()).toBe(200);
    await h.expectClean();
  });

  it("one attempt only: a transient failure is RetryExhaustedError(attempts, 1) with no sleep", async () => {
    const h = createHarness();
    const log: Attempts = { starts: [], thrown: [] };

    const error = await h
      .run(() => retry(working(h, log), { attempts: 1, backoff: constant(100) }))
      .then(
        () => null,
        (e: unknown) => e,
      );

    expect(error).toBeInstanceOf(RetryExhaustedError);
    expect(error).toMatchObject({ reason: "attempts", attempts: 1, elapsedMs: 300 });
    expect((error as RetryExhaustedError).cause).toBe(log.thrown[0]);
    expect(h.eventsOf("retry:sleep")).toHaveLength(0);
    await h.expectClean();
  });

  it("an external cancel during a per-attempt-limited attempt is not retried and leaves no timer", async () => {
    const h = createHarness();
    const log: Attempts = { starts: [], thrown: [] };
    const asked: unknown[] = [];
    const task = h.run(() =>
      retry(hanging(h, log), {
        attempts: 5,
        perAttemptMs: 200,
        backoff: constant(100),
        retryOn: (e) => {
          asked.push(e);
          return true;
        },
      }),
    );
    const settled = new Promise<[number, number]>((resolve) => {
      h.clock.schedule(350, () => {
        task.cancel().then(() => resolve([h.clock.now(), h.clock.pendingTimers]));
      });
    });

    const error = await task.then(
      () => null,
      (e: unknown) => e,
    );

    expect(await settled).toEqual([350, 0]);
    expect(log.starts).toEqual([0, 300]);
    expect(asked).toHaveLength(1);
    expect(isTimeoutError(asked[0])).toBe(true);
    expect(task.state).toBe("cancelled");
    expect(error).toBeInstanceOf(TaskCancelledError);
    expect(h.eventsOf("retry:giveup")).toHaveLength(0);
    await h.expectClean();
  });

  it("an error thrown in a finally while the task is cancelled propagates, as without retry (issue 11)", async () => {
    const closeErr = new Error("close failed");
    const outcomes = [];
    for (const withRetry of [false, true]) {
      const h = createHarness();
      const clock = h.clock;
      function* attempt() {
        try {
          yield* sleep(100);
        } finally {
          // biome-ignore lint/correctness/noUnsafeFinally: a cleanup that fails is the case.
          throw closeErr;
        }
      }
      const t = h.run(() => (withRetry ? retry(attempt, { attempts: 2, retryOn: () => true }) : attempt()));
      clock.schedule(10, () => t.cancel());
      await expect(t).rejects.toBe(closeErr);
      outcomes.push({
        state: t.state,
        replaced: h.eventsOf("cancel:replaced").map((e) => [e.error, e.reason.kind, e.at]),
        swallows: h.eventsOf("cleanup:swallow").length,
        attempts: h.eventsOf("retry:attempt").length,
      });
      await h.expectClean();
    }
    const expected = { state: "failed", replaced: [[closeErr, "cancel", 10]], swallows: 0 };
    expect(outcomes).toEqual([
      { ...expected, attempts: 0 },
      { ...expected, attempts: 1 },
    ]);
  });
});

describe("retry's bad input", () => {
  const op = function* never(): Operation<string> {
    throw new Error("op must not start");
  };
  const bad: ReadonlyArray<[string, RetryPolicy, typeof RangeError | typeof TypeError, RegExp]> = [
    ["attempts 0", { attempts: 0 }, RangeError, /attempts/],
    ["attempts -1", { attempts: -1 }, RangeError, /attempts/],
    ["attempts NaN", { attempts: Number.NaN }, RangeError, /attempts/],
    ["attempts 1.5", { attempts: 1.5 }, RangeError, /attempts/],
    ["attempts -Infinity", { attempts: -Infinity }, RangeError, /attempts/],
    ["budgetMs NaN", { budgetMs: Number.NaN }, RangeError, /budgetMs/],
    ["budgetMs -1", { budgetMs: -1 }, RangeError, /budgetMs/],
    ["perAttemptMs NaN", { perAttemptMs: Number.NaN }, RangeError, /perAttemptMs/],
    ["perAttemptMs -1", { perAttemptMs: -1 }, RangeError, /perAttemptMs/],
    ["a backoff without next", { backoff: {} as never }, TypeError, /backoff/],
    ["a non-function retryOn", { retryOn: "yes" as never }, TypeError, /retryOn/],
    ["a non-function onRetry", { onRetry: 1 as never }, TypeError, /onRetry/],
  ];

  for (const [what, policy, kind, names] of bad) {
    it(`${what} is a ${kind.name} naming the parameter, thrown when retry is called`, () => {
      let calls = 0;
      const counted = function* counted(): Operation<string> {
        calls++;
        return yield* op();
      };
      expect(() => retry(counted, policy)).toThrow(kind);
      expect(() => retry(counted, policy)).toThrow(names);
      expect(calls).toBe(0);
    });

    it(`${what} fails the task at 0 before any attempt or timer starts`, async () => {
      const h = createHarness();
      let calls = 0;
      let timersAtThrow = -1;

      const error = await h
        .run(function* caller() {
          try {
            return yield* retry(function* counted() {
              calls++;
              return "ran";
            }, policy);
          } catch (e) {
            timersAtThrow = h.clock.pendingTimers;
            throw e;
          }
        })
        .then(
          () => null,
          (e: unknown) => e,
        );

      expect(error).toBeInstanceOf(kind);
      expect((error as Error).message).toMatch(names);
      expect(calls).toBe(0);
      expect(timersAtThrow).toBe(0);
      expect(h.clock.now()).toBe(0);
      expect(h.eventsOf("retry:attempt")).toHaveLength(0);
      await h.expectClean();
    });
  }

  it("a non-operation is a TypeError", () => {
    expect(() => retry(42 as never)).toThrow(TypeError);
  });
});

describe("retry's randomness", () => {
  /** Runs `body` with Math.random stubbed to throw, so any use of it fails the test. */
  async function withoutMathRandom(body: () => Promise<void>): Promise<void> {
    const spy = vi.spyOn(Math, "random").mockImplementation(() => {
      throw new Error("Math.random was called");
    });
    try {
      await body();
      expect(spy).not.toHaveBeenCalled();
    } finally {
      spy.mockRestore();
    }
  }

  // The default backoff, exponential({ baseMs: 200, factor: 2, maxMs: 3000, jitter: "full" }), at 0.25.
  const expectedStarts = [0, 50, 150, 350, 750];

  it("the run option's source drives the default jitter, and Math.random is never called", async () => {
    await withoutMathRandom(async () => {
      const h = createHarness();
      const log: Attempts = { starts: [], thrown: [] };
      const attempt = function* fail(): Operation<string> {
        log.starts.push(h.clock.now());
        throw busy();
      };

      const error = await h
        .run(() => retry(attempt), { random: () => 0.25 })
        .then(
          () => null,
          (e: unknown) => e,
        );

      expect(log.starts).toEqual(expectedStarts);
      expect(error).toMatchObject({ reason: "attempts", attempts: 5 });
      await h.expectClean();
    });
  });

  it("withRandom's source drives the default jitter, and Math.random is never called", async () => {
    await withoutMathRandom(async () => {
      const h = createHarness();
      const log: Attempts = { starts: [], thrown: [] };
      const attempt = function* fail(): Operation<string> {
        log.starts.push(h.clock.now());
        throw busy();
      };

      const error = await h
        .run(() => withRandom(() => 0.25, retry(attempt)))
        .then(
          () => null,
          (e: unknown) => e,
        );

      expect(log.starts).toEqual(expectedStarts);
      expect(error).toMatchObject({ reason: "attempts", attempts: 5 });
      await h.expectClean();
    });
  });
});

/**
 * `timeout:start`/`timeout:end` and `retry:start`/`retry:end` (issue 13: timeout and retry scopes
 * as spans), and the deadline left that `retry:attempt` and `http:request` carry.
 */
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import {
  constant,
  KEEL_CHANNELS,
  type KeelEvent,
  retry,
  run,
  shield,
  sleep,
  spawn,
  suspend,
  timeout,
  timeoutAt,
} from "@keel/core";
import { createHarness, createVirtualClock } from "@keel/testing";
import { describe, expect, it } from "vitest";

/** `type label k=v…@at` for the scope events, in order. */
function scopeLog(events: KeelEvent[]): string[] {
  const out: string[] = [];
  for (const e of events) {
    if (e.type === "timeout:start")
      out.push(`${e.type} ${e.scope.label} ms=${e.timeoutMs} left=${e.deadlineLeftMs}@${e.at}`);
    else if (e.type === "timeout:end")
      out.push(`${e.type} ${e.scope.label} ${e.outcome} fired=${e.fired} elapsed=${e.elapsedMs}@${e.at}`);
    else if (e.type === "timeout:fire") out.push(`${e.type} ${e.scope.label}@${e.at}`);
    else if (e.type === "retry:start")
      out.push(
        `${e.type} ${e.label} N=${e.attempts} budget=${e.budgetMs} per=${e.perAttemptMs} left=${e.deadlineLeftMs}@${e.at}`,
      );
    else if (e.type === "retry:attempt")
      out.push(`${e.type} ${e.attempt}/${e.attempts} left=${e.deadlineLeftMs}@${e.at}`);
    else if (e.type === "retry:end") out.push(`${e.type} ${e.label} ${e.outcome} k=${e.attempt}@${e.at}`);
  }
  return out;
}

describe("timeout scope events", () => {
  it("a scope that completes, one that fires, one whose body fails: start and end with the outcome", async () => {
    const h = createHarness();
    await h.run(function* () {
      yield* timeout(100, sleep(10));
      try {
        yield* timeout(20, sleep(50), { label: "stock" });
      } catch {}
      try {
        yield* timeout(30, function* () {
          yield* sleep(5);
          throw new Error("boom");
        });
      } catch {}
    });
    expect(scopeLog(h.events)).toEqual([
      "timeout:start timeout(100) ms=100 left=100@0",
      "timeout:end timeout(100) completed fired=false elapsed=10@10",
      "timeout:start timeout(20, stock) ms=20 left=20@10",
      "timeout:fire timeout(20, stock)@30",
      "timeout:end timeout(20, stock) timed-out fired=true elapsed=20@30",
      "timeout:start timeout(30) ms=30 left=30@30",
      "timeout:end timeout(30) failed fired=false elapsed=5@35",
    ]);
    // Start and end name the same scope.
    const [start, end] = [h.eventsOf("timeout:start")[1]!, h.eventsOf("timeout:end")[1]!];
    expect(end.scope).toEqual(start.scope);
    await h.expectClean();
  });

  it("an inner scope cut by an outer one ends cancelled, with the outer deadline as what is left", async () => {
    const h = createHarness();
    await h.run(function* () {
      try {
        yield* timeoutAt(50, function* () {
          yield* sleep(10);
          yield* timeout(200, suspend());
        });
      } catch {}
    });
    expect(scopeLog(h.events)).toEqual([
      "timeout:start timeoutAt(50) ms=50 left=50@0",
      // Its own budget is 200 ms; the outer deadline leaves 40.
      "timeout:start timeout(200) ms=200 left=40@10",
      "timeout:fire timeoutAt(50)@50",
      "timeout:end timeout(200) cancelled fired=false elapsed=40@50",
      "timeout:end timeoutAt(50) timed-out fired=true elapsed=50@50",
    ]);
  });

  it("internal limits report nothing of the kind: a shield's limit", async () => {
    const h = createHarness();
    await h.run(function* () {
      yield* shield(sleep(5), { limitMs: 100 });
    });
    expect(scopeLog(h.events)).toEqual([]);
  });

  it("is published on keel:timeout and keel:retry, and nothing is emitted where nobody listens", async () => {
    const seen: string[] = [];
    const onMessage = (m: unknown) => seen.push((m as KeelEvent).type);
    subscribe(KEEL_CHANNELS.timeout, onMessage);
    subscribe(KEEL_CHANNELS.retry, onMessage);
    const clock = createVirtualClock();
    const op = () => timeout(50, retry(sleep(1), { attempts: 1 }));
    try {
      await run(op, { clock });
    } finally {
      unsubscribe(KEEL_CHANNELS.timeout, onMessage);
      unsubscribe(KEEL_CHANNELS.retry, onMessage);
    }
    expect(seen).toEqual([
      "timeout:start",
      "retry:start",
      "retry:attempt",
      "retry:success",
      "retry:end",
      "timeout:end",
    ]);
    seen.length = 0;
    await run(op, { clock });
    expect(seen).toEqual([]);
  });
});

describe("retry scope events", () => {
  it("a retry that succeeds, with its budget and per-attempt timeouts reported inside it", async () => {
    const h = createHarness();
    let calls = 0;
    await h.run(() =>
      timeout(1000, function* () {
        yield* retry(
          function* charge() {
            yield* sleep(++calls === 1 ? 500 : 10);
          },
          { attempts: 3, budgetMs: 600, perAttemptMs: 100, backoff: constant(5), retryOn: () => true },
        );
      }),
    );
    expect(scopeLog(h.events)).toEqual([
      "timeout:start timeout(1000) ms=1000 left=1000@0",
      "retry:start retry(charge) N=3 budget=600 per=100 left=1000@0",
      "timeout:start retry(charge) budget 600 ms ms=600 left=600@0",
      "retry:attempt 1/3 left=600@0",
      "timeout:start retry(charge) attempt 1 ms=100 left=100@0",
      "timeout:fire retry(charge) attempt 1@100",
      "timeout:end retry(charge) attempt 1 timed-out fired=true elapsed=100@100",
      "retry:attempt 2/3 left=495@105",
      "timeout:start retry(charge) attempt 2 ms=100 left=100@105",
      "timeout:end retry(charge) attempt 2 completed fired=false elapsed=10@115",
      "timeout:end retry(charge) budget 600 ms completed fired=false elapsed=115@115",
      "retry:end retry(charge) success k=2@115",
      "timeout:end timeout(1000) completed fired=false elapsed=115@115",
    ]);
    await h.expectClean();
  });

  it("ends giveup when it gives up (attempts, budget or an error not retried), cancelled when cut", async () => {
    const h = createHarness();
    const fail = function* flaky() {
      yield* sleep(10);
      throw new Error("no");
    };
    await h.run(function* () {
      try {
        yield* retry(fail, { attempts: 2, backoff: constant(1), retryOn: () => true });
      } catch {}
      try {
        yield* retry(fail, { attempts: 2, retryOn: () => false });
      } catch {}
      try {
        yield* timeout(15, retry(fail, { attempts: 5, backoff: constant(1), retryOn: () => true }));
      } catch {}
      try {
        yield* retry(fail, {
          attempts: 2,
          retryOn: () => {
            throw new Error("retryOn broke");
          },
        });
      } catch {}
    });
    const ends = h
      .eventsOf("retry:end")
      .map((e) => `${e.outcome} k=${e.attempt} ${(e.error as Error).message}`);
    expect(ends).toEqual([
      "giveup k=2 retry(flaky): all 2 attempts failed in 21 ms; last error: Error: no",
      "giveup k=1 no",
      expect.stringMatching(/^cancelled k=2 /),
      "failed k=1 retryOn broke",
    ]);
    await h.expectClean();
  });

  it("a retry in a task that goes on after its scope was cut still ends (retry:end) before the next one", async () => {
    const h = createHarness();
    await h.run(function* () {
      const child = yield* spawn(function* worker() {
        try {
          yield* timeout(5, retry(suspend, { attempts: 2 }));
        } catch {}
        yield* retry(sleep(1), { attempts: 1 });
      });
      yield* child;
    });
    const types = h.events.filter((e) => e.type.startsWith("retry:")).map((e) => e.type);
    expect(types).toEqual([
      "retry:start",
      "retry:attempt",
      "retry:end",
      "retry:start",
      "retry:attempt",
      "retry:success",
      "retry:end",
    ]);
  });
});

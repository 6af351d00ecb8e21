/**
 * Time bounds on cleanup and abandonment (semantics §2, §5, §6): an abandonment keeps a child's
 * error, nested shields cannot outlast the outermost limit, a delivery deferred by a wait for
 * children does not add a budget, and a shield still protects its caller for its whole limit.
 */
import {
  cleanupBudget,
  race,
  run,
  scoped,
  shield,
  sleep,
  spawn,
  suspend,
  TaskCancelledError,
  TimeoutError,
  withCleanupBudget,
} from "@keel/core";
import { createHarness, type Harness } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { settleOfTask } from "./support/events.js";
import { cancelAt } from "./support/timing.js";

/** A shielded work that swallows every cancellation and waits again (the adversary of §5). */
function* swallowForever(): Generator<unknown, never, unknown> {
  for (;;) {
    try {
      yield* suspend();
    } catch {}
  }
}

function eventsAt(h: Harness, type: "cleanup:overrun" | "cleanup:abandon") {
  return h.eventsOf(type).map((e) => `${e.path} ${e.waitingOn}@${e.at}`);
}

describe("abandonment keeps the errors it owes (semantics §2, §5)", () => {
  it("a worker's error is what its owner fails with when the owner's shielded flush overruns", async () => {
    const h = createHarness();
    const workerErr = new Error("worker failed");
    const t = h.run(
      function* owner() {
        try {
          yield* spawn(function* worker() {
            yield* sleep(10);
            throw workerErr;
          });
          yield* suspend();
        } finally {
          // A naive retry loop that catches everything, its own cancellation included.
          yield* shield(function* flush() {
            for (;;) {
              try {
                yield* sleep(30);
                throw new Error("flush failed");
              } catch {}
            }
          });
        }
      },
      { cleanupBudgetMs: 100 },
    );

    await expect(t).rejects.toBe(workerErr);
    expect(t.state).toBe("failed");
    expect(settleOfTask(h, t).at).toBe(210);
    // Nobody cancelled the owner and it swallowed nothing: only the flush is abandoned, and the
    // reports name the steps that overran.
    expect(eventsAt(h, "cleanup:overrun")).toEqual([
      `owner#${t.id} shield(flush): waiting for flush#${t.id + 2}@110`,
      `owner#${t.id}/flush#${t.id + 2} sleep(30)@210`,
    ]);
    expect(eventsAt(h, "cleanup:abandon")).toEqual([`owner#${t.id}/flush#${t.id + 2} sleep(30)@210`]);
    await h.expectClean();
  });
  it("a child that fails while its abandoned owner awaits it is the owner's error (found by the attacker)", async () => {
    const h = createHarness();
    const closeErr = new Error("close failed");
    const t = h.run(
      function* owner() {
        yield* spawn(() =>
          withCleanupBudget(100, function* conn() {
            try {
              yield* suspend();
            } finally {
              try {
                yield* sleep(1000); // cut at 110 by its own budget
              } finally {
                // biome-ignore lint/correctness/noUnsafeFinally: the failing close under test.
                throw closeErr;
              }
            }
          }),
        );
        for (;;) {
          try {
            yield* suspend();
          } catch {} // swallows everything: abandoned at its cut, 60
        }
      },
      { cleanupBudgetMs: 50 },
    );
    cancelAt(h, t, 10);

    await expect(t).rejects.toBe(closeErr);
    expect(h.eventsOf("cleanup:abandon").map((e) => `${e.path}@${e.at}`)).toEqual([`owner#${t.id}@60`]);
    expect(settleOfTask(h, t).at).toBe(110);
    await h.expectClean();
  });
});

describe("shield limits nest like deadlines (semantics §6)", () => {
  it("nested shields in a finally settle within the outermost limit plus one cleanup budget", async () => {
    const h = createHarness();
    const t = h.run(
      function* owner() {
        try {
          yield* suspend();
        } finally {
          yield* shield(() => shield(swallowForever, { limitMs: 1800 }), { limitMs: 900 });
        }
      },
      { cleanupBudgetMs: 300 },
    );
    const settled = cancelAt(h, t, 10);

    // Entered at 10: the inner shield gets what is left of the outer's 900 ms, not 1800.
    expect(await settled).toBe(10 + 900 + 300);
    expect(h.eventsOf("timeout:fire").map((e) => `${e.scope.label}@${e.at}`)).toEqual([
      "shield(op) limit 900 ms@910",
      "shield(swallowForever) limit 900 ms@910",
    ]);
    expect(t.state).toBe("cancelled");
    await h.expectClean();
  });

  it("an inner shield entered later gets only what is left of the enclosing limit", async () => {
    const h = createHarness();
    const t = h.run(() =>
      shield(
        function* outer() {
          yield* sleep(400);
          yield* shield(sleep(5000), { limitMs: 2000 });
        },
        { limitMs: 1000 },
      ),
    );

    await expect(t).rejects.toBeInstanceOf(TimeoutError);
    expect(settleOfTask(h, t).at).toBe(1000);
    expect(h.eventsOf("timeout:fire").map((e) => `${e.scope.label}@${e.at}`)).toEqual([
      "shield(outer) limit 1000 ms@1000",
      "shield(op) limit 600 ms@1000",
    ]);
    await h.expectClean();
  });

  it("a cleanup budget of Infinity is refused, as limitMs: Infinity is", () => {
    expect(() => withCleanupBudget(Infinity, suspend())).toThrow(RangeError);
    expect(() => withCleanupBudget(Infinity, suspend())).toThrow(/withCleanupBudget\(ms\).*finite/);
    expect(() => run(suspend, { cleanupBudgetMs: Infinity })).toThrow(RangeError);
    expect(() => run(suspend, { cleanupBudgetMs: Infinity })).toThrow(
      /run\(op, \{ cleanupBudgetMs \}\).*finite/,
    );
    expect(() => shield(suspend(), { limitMs: Infinity })).toThrow(RangeError);
  });
});

describe("the cleanup budget counts from the request (semantics §5)", () => {
  it("a root cancelled while its race waits for a loser's cleanup settles within two budgets", async () => {
    const h = createHarness();
    const B = 5000;
    const t = h.run(
      function* root() {
        try {
          yield* race([
            function* winner() {
              yield* sleep(10);
              return "won";
            },
            function* loser() {
              try {
                yield* suspend();
              } finally {
                // A cleanup that waits for a child of its own: the loser takes two budgets to go.
                yield* scoped(function* drain() {
                  yield* spawn(function* conn() {
                    try {
                      yield* suspend();
                    } finally {
                      yield* suspend();
                    }
                  });
                  yield* suspend();
                });
              }
            },
          ]);
        } finally {
          yield* suspend();
        }
      },
      { cleanupBudgetMs: B },
    );
    const settled = cancelAt(h, t, 20);

    // The loser goes at 10 + 2B; the root's budget ran from 20, so its own cleanup is cut on
    // arrival instead of getting a third budget (today's 15,010).
    expect(await settled).toBe(10 + 2 * B);
    expect(eventsAt(h, "cleanup:overrun").at(-1)).toBe(`root#${t.id} suspend()@${10 + 2 * B}`);
    await expect(t).rejects.toBeInstanceOf(TaskCancelledError);
    await h.expectClean();
  });

  it("a shield in the body still holds its caller for its whole limit, then the caller gets its budget", async () => {
    const h = createHarness();
    const t = h.run(
      function* P() {
        try {
          yield* shield(
            function* commit() {
              yield* sleep(8000);
              h.mark("committed");
            },
            { limitMs: 10_000 },
          );
        } finally {
          yield* sleep(1000);
          h.mark("P.fin");
        }
      },
      { cleanupBudgetMs: 5000 },
    );
    const settled = cancelAt(h, t, 100);

    // Waiting at the shield is the shield's time, not cleanup: no cut at 5100.
    expect(await settled).toBe(9000);
    expect(h.log).toEqual(["committed@8000", "P.fin@9000"]);
    expect(h.eventsOf("cleanup:overrun")).toEqual([]);
    await h.expectClean();
  });
});

describe("abandonment reaches a loop that never suspends (found by the attacker property test)", () => {
  it("a loop that swallows what entering a scope throws after the cut is abandoned, not spun forever", async () => {
    const h = createHarness();
    const t = h.run(
      function* spin() {
        for (;;) {
          try {
            // After the cut, entering the scope throws at once: no suspension point is reached.
            yield* scoped(suspend);
          } catch {}
        }
      },
      { cleanupBudgetMs: 100 },
    );
    const settled = cancelAt(h, t, 10);

    expect(await settled).toBe(110);
    expect(h.eventsOf("cleanup:abandon").map((e) => e.at)).toEqual([110]);
    await h.expectClean();
  });
});

describe("the virtual clock cannot freeze (semantics §5 on a virtual clock)", () => {
  it("a loop of sleep(0) that swallows its cancellation is cut and abandoned at the budget, as on a real clock", async () => {
    const h = createHarness();
    let turns = 0;
    const t = h.run(
      function* spin() {
        for (;;) {
          try {
            turns++;
            yield* sleep(0);
          } catch {}
        }
      },
      { cleanupBudgetMs: 100 },
    );
    const settled = cancelAt(h, t, 10);

    // The loop never lets the runtime go idle with time moving; the clock moves on to the cut.
    expect(await settled).toBe(110);
    expect(eventsAt(h, "cleanup:overrun")).toEqual([`spin#${t.id} sleep(0)@110`]);
    expect(eventsAt(h, "cleanup:abandon")).toEqual([`spin#${t.id} sleep(0)@110`]);
    expect(turns).toBeGreaterThan(1000);
    await h.expectClean();
  });

  it("a busy instant still fires its own timers first, in order, before time moves on", async () => {
    const h = createHarness();
    const seen: string[] = [];
    h.clock.schedule(50, () => seen.push(`later@${h.clock.now()}`));
    await h.run(function* busy() {
      for (let i = 0; i < 1500; i++) yield* sleep(0);
      seen.push(`busy done@${h.clock.now()}`);
    });

    // 1500 same-instant turns: the 1000th lets time pass to 50, and the loop finishes there.
    expect(seen).toEqual(["later@50", "busy done@50"]);
    await h.expectClean();
  });
});

describe("cleanupBudget() reads the budget in force", () => {
  it("the runtime's (default or given), a region's inside withCleanupBudget, and a child's inherited", async () => {
    expect(await run(cleanupBudget)).toBe(5000);
    expect(await run(cleanupBudget, { cleanupBudgetMs: 250 })).toBe(250);
    const inRegion = await run(
      () =>
        withCleanupBudget(40, function* region() {
          const child = yield* spawn(cleanupBudget);
          return [yield* cleanupBudget(), yield* child];
        }),
      { cleanupBudgetMs: 250 },
    );
    expect(inRegion).toEqual([40, 40]);
  });
});

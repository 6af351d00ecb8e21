/**
 * Many children that swallow their cancellation (semantics §5; issue 23, item 8): cancelling a scope
 * of N of them settles within two cleanup budgets of the request, whatever N is, and the work the
 * runtime does on each after its cut is bounded by the depth of a stack, not by "a loop".
 */
import { isCancelled, type Operation, scoped, sleep, spawn, suspend, timeout } from "@keel/core";
import { createHarness } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { HARD_THROW_LIMIT } from "../src/kernel/cancellable.js";
import { cancelAt } from "./support/timing.js";

const B = 300;
const SIZES = [10, 100, 500];

/** The swallowers: each catches the `Cancelled` its scope's cancellation delivers, then goes on. */
const swallowers: Record<string, () => Operation<void>> = {
  *"catches it, then waits again"() {
    try {
      yield* sleep(10_000);
    } catch {
      yield* sleep(10_000);
    }
  },
  *"swallows it once, then loops on as before"() {
    let swallowed = false;
    for (;;) {
      try {
        yield* sleep(10_000);
      } catch (e) {
        if (!isCancelled(e) || swallowed) throw e;
        swallowed = true;
      }
    }
  },
  *"swallows every one in a loop"() {
    for (;;) {
      try {
        yield* sleep(10_000);
      } catch {}
    }
  },
  *"swallows in a finally that loops"() {
    try {
      yield* suspend();
    } finally {
      for (;;) {
        try {
          yield* sleep(10_000);
        } catch {}
      }
    }
  },
  *"swallows once, then spins on sleep(0)"() {
    try {
      yield* suspend();
    } catch {}
    for (;;) {
      try {
        yield* sleep(0);
      } catch {}
    }
  },
};

/** A root whose scope holds `n` children running `child`, waiting until cancelled. */
function scopeOf(n: number, child: () => Operation<void>): () => Operation<void> {
  return () =>
    scoped(function* group() {
      for (let i = 0; i < n; i++) yield* spawn(child);
      yield* suspend();
    });
}

describe("a scope of children that swallow their cancellation settles within two budgets (semantics §5)", () => {
  for (const [shape, child] of Object.entries(swallowers)) {
    it(`each ${shape}: settled at the cut, one budget after the request, for N = ${SIZES.join(", ")}`, async () => {
      for (const n of SIZES) {
        const h = createHarness();
        const t = h.run(scopeOf(n, child), { cleanupBudgetMs: B });
        const settled = await cancelAt(h, t, 10);

        // The contract allows two budgets (the cut, then abandonment one budget later); every shape
        // here is done at the cut: its next suspension point throws at once, or it is abandoned.
        expect(settled - 10, `N = ${n}`).toBe(B);
        expect(h.eventsOf("cleanup:overrun"), `N = ${n}`).toHaveLength(n);
        await h.expectClean();
      }
    });
  }

  it("children cancelled by a timeout settle one budget after it fired, whatever their number", async () => {
    for (const n of SIZES) {
      const h = createHarness();
      const t = h.run(() => timeout(50, scopeOf(n, swallowers["swallows every one in a loop"]!)), {
        cleanupBudgetMs: B,
      });

      await expect(t).rejects.toMatchObject({ name: "TimeoutError" });
      expect(h.eventsOf("task:settle").find((e) => e.taskId === t.id)!.at, `N = ${n}`).toBe(50 + B);
      await h.expectClean();
    }
  });

  it("children whose cleanup waits for a swallowing grandchild settle by two budgets, not more", async () => {
    for (const n of SIZES) {
      const h = createHarness();
      const t = h.run(
        scopeOf(n, function* parentOfStubborn() {
          try {
            yield* suspend();
          } finally {
            // A scope entered during cleanup is fresh: its grandchild is cancelled only when the
            // child's cut (at B) ends the scope, and is cut one budget later.
            yield* scoped(function* drain() {
              yield* spawn(swallowers["swallows every one in a loop"]!);
              yield* suspend();
            });
          }
        }),
        { cleanupBudgetMs: B },
      );
      const settled = await cancelAt(h, t, 10);

      expect(settled - 10, `N = ${n}`).toBe(2 * B);
      await h.expectClean();
    }
  });
});

describe("after its cut, a task is abandoned after as many throws as a stack of finally blocks takes", () => {
  it("a child that swallows every throw is abandoned after HARD_THROW_LIMIT of them, each of 500 siblings alike", async () => {
    const n = 500;
    const h = createHarness();
    let catches = 0;
    const t = h.run(
      scopeOf(n, function* stubborn() {
        for (;;) {
          try {
            yield* sleep(10_000);
          } catch {
            catches++;
          }
        }
      }),
      { cleanupBudgetMs: B },
    );
    const settled = await cancelAt(h, t, 10);

    expect(settled - 10).toBe(B);
    // One catch for the delivery, then the immediate throws after the cut (the one past the limit
    // abandons instead): the synchronous work a cut costs grows with the stack a task may
    // legitimately unwind, never with a loop's patience.
    expect(catches).toBe(n * (1 + HARD_THROW_LIMIT));
    expect(HARD_THROW_LIMIT).toBeLessThanOrEqual(64);
    expect(h.eventsOf("cleanup:abandon")).toHaveLength(n);
    await h.expectClean();
  });

  it("a stack of finally blocks that each wait still runs every one of them after the cut", async () => {
    const h = createHarness();
    const ran: number[] = [];
    const depth = 20;
    const nest = (level: number): Operation<void> => ({
      *[Symbol.iterator]() {
        try {
          if (level === depth) yield* suspend();
          else yield* nest(level + 1);
        } finally {
          ran.push(level);
          yield* sleep(10_000); // cut at once after the budget: the throw goes on outwards
        }
      },
    });
    const t = h.run(() => nest(0), { cleanupBudgetMs: B });
    const settled = await cancelAt(h, t, 10);

    expect(settled - 10).toBe(B);
    expect(ran).toEqual(Array.from({ length: depth + 1 }, (_, i) => depth - i));
    expect(h.eventsOf("cleanup:abandon")).toEqual([]);
    await h.expectClean();
  });
});

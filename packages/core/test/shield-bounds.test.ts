/**
 * Nested shields and chains of them (semantics §6; issue 23, item 8): cancelling a task whose
 * `finally` nests shields settles within the outermost limit plus one cleanup budget, however deep
 * the nesting, and a late timer's lag is paid once, not once per level.
 */
import { type Clock, type Operation, run, shield, suspend } from "@keel/core";
import { createHarness, createVirtualClock } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { cancelAt } from "./support/timing.js";

const B = 300;
const L = 900;

/** Swallows every cancellation (the adversary of §5: abandoned once cut). */
function* swallowForever(): Generator<unknown, never, unknown> {
  for (;;) {
    try {
      yield* suspend();
    } catch {}
  }
}

/** Swallows one cancellation, then waits again (done at its cut). */
function* swallowOnce(): Generator<unknown, void, unknown> {
  try {
    yield* suspend();
  } catch {}
  yield* suspend();
}

const leaves = { swallowForever, swallowOnce } as const;

/** `depth` levels: each hangs, and its `finally` enters a shield (limit `limitMs`) on the next. */
function chain(depth: number, leaf: () => Operation<unknown>, limitMs: number): () => Operation<void> {
  return function* level() {
    if (depth === 0) {
      yield* leaf();
      return;
    }
    try {
      yield* suspend();
    } finally {
      yield* shield(chain(depth - 1, leaf, limitMs), { limitMs });
    }
  };
}

/** `depth` shields, each directly around the next (limits 2L: capped by the outermost). */
function nested(depth: number, leaf: () => Operation<unknown>): () => Operation<void> {
  return () =>
    (depth === 0 ? leaf() : shield(nested(depth - 1, leaf), { limitMs: 2 * L })) as Operation<void>;
}

/** A task whose `finally` enters a shield of limit L on `inner`. */
function owner(inner: () => Operation<void>): () => Operation<void> {
  return function* owner() {
    try {
      yield* suspend();
    } finally {
      yield* shield(inner, { limitMs: L });
    }
  };
}

describe("a finally that nests shields settles within the outermost limit plus one budget (semantics §6)", () => {
  for (const [leafName, leaf] of Object.entries(leaves)) {
    for (const innerLimit of [100, L, 2000]) {
      it(`a chain of shields in finally blocks, inner limits ${innerLimit} ms, ${leafName} at the end`, async () => {
        for (const depth of [1, 2, 3, 5, 8]) {
          const h = createHarness();
          const t = h.run(owner(chain(depth, leaf, innerLimit)), { cleanupBudgetMs: B });
          const settled = await cancelAt(h, t, 10);

          // Each level used to start a fresh budget where its caller's ended: depth 5 settled at
          // L + 4B, depth 8 at L + 7B.
          expect(settled - 10, `depth ${depth}`).toBeLessThanOrEqual(L + B);
          expect(t.state).toBe("cancelled");
          await h.expectClean();
        }
      });
    }
    it(`shields nested directly in a finally, ${leafName} innermost`, async () => {
      for (const depth of [1, 2, 3, 5, 8]) {
        const h = createHarness();
        const t = h.run(owner(nested(depth, leaf)), { cleanupBudgetMs: B });
        const settled = await cancelAt(h, t, 10);

        expect(settled - 10, `depth ${depth}`).toBe(L + B);
        await h.expectClean();
      }
    });
  }

  it("the chain's deepest work is cut at the outermost limit plus one budget, not one budget after its own limit", async () => {
    const h = createHarness();
    const t = h.run(owner(chain(4, swallowForever, L)), { cleanupBudgetMs: B });
    const settled = await cancelAt(h, t, 10);

    expect(settled).toBe(10 + L + B);
    const cuts = h.eventsOf("cleanup:overrun").map((e) => e.at);
    expect(Math.max(...cuts)).toBe(10 + L + B);
    await h.expectClean();
  });

  it("shields one after another in a finally: the later of the outermost limit and the caller's budget, plus one budget", async () => {
    // The caller's cut (at 10 + B) interrupts the third shield, whose work then gets one budget:
    // the contract's "outermost limit plus one budget" reads as the later of the two, plus one.
    const h = createHarness();
    const short = 100;
    const t = h.run(
      function* owner() {
        try {
          yield* suspend();
        } finally {
          for (let i = 0; i < 3; i++) yield* shield(swallowForever, { limitMs: short });
        }
      },
      { cleanupBudgetMs: B },
    );
    const settled = await cancelAt(h, t, 10);

    expect(settled - 10).toBeLessThanOrEqual(Math.max(short, B) + B);
    await h.expectClean();
  });
});

/** A clock on `inner` whose timers all fire `lagMs` late, as a real clock's do on a busy machine. */
function laggyClock(inner: Clock, lagMs: number): Clock {
  return { now: () => inner.now(), schedule: (at, fn) => inner.schedule(at + lagMs, fn) };
}

describe("timer lag is paid once, not once per level of shields", () => {
  for (const [name, inner] of [
    ["nested shields", nested(3, swallowForever)],
    ["a chain of shields in finally blocks", chain(4, swallowOnce, L)],
  ] as const) {
    it(`${name}, every timer 25 ms late, settle within the outermost limit plus one budget plus one lag`, async () => {
      const lag = 25;
      const virtual = createVirtualClock();
      const t = run(owner(inner), { clock: laggyClock(virtual, lag), cleanupBudgetMs: B, onEvent: () => {} });
      const settledAt = await new Promise<number>((resolve) => {
        virtual.schedule(10, () => {
          t.cancel().then(() => resolve(virtual.now()));
        });
      });

      // Before, each level counted its budget from when its timer ran: two lags for nested
      // shields, more down a chain (the operator's 18-54 ms and 30-104 ms past the bound).
      expect(settledAt - 10).toBeLessThanOrEqual(L + B + lag);
      expect(t.state).toBe("cancelled");
    });
  }
});

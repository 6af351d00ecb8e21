/**
 * What is reported is true (semantics §2, issue 10 item 3, issue 11 "errors that vanish or are
 * invented"): a timeout that never fired leaves no trace on a child's error, a warning means that
 * something was actually dropped, and a printed warning gives a readable time.
 */
import {
  all,
  type Operation,
  race,
  run,
  scoped,
  shield,
  sleep,
  spawn,
  suspend,
  type Task,
  timeout,
} from "@keel/core";
import { createHarness, createVirtualClock, type Harness } from "@keel/testing";
import { afterEach, describe, expect, it, vi } from "vitest";

class Boom extends Error {
  override name = "Boom";
}

/** Fails at 5. */
function failing(boom: Boom) {
  return function* child(): Operation<never> {
    yield* sleep(5);
    throw boom;
  };
}

/** The traces a never-fired timeout used to leave: warnings and `suppressed` entries. */
function traces(h: Harness, error: unknown) {
  return {
    suppressed: (error as { suppressed?: unknown[] }).suppressed ?? [],
    warnings: h.events
      .filter((e) => e.type === "error:suppressed" || e.type === "cancel:replaced")
      .map((e) => `${e.type}@${e.at}`),
    timeoutFires: h.eventsOf("timeout:fire").length,
  };
}

const noTrace = { suppressed: [], warnings: [], timeoutFires: 0 };

describe("a timeout that never fired leaves no trace on a child's error", () => {
  const layouts: Record<string, (boom: Boom) => Operation<unknown>> = {
    "joined inside timeout": (boom) =>
      timeout(1000, function* body() {
        const c = yield* spawn(failing(boom));
        return yield* c;
      }),
    "left running while the body sleeps": (boom) =>
      timeout(1000, function* body() {
        yield* spawn(failing(boom));
        yield* sleep(100);
      }),
    "in a scoped group inside timeout": (boom) =>
      timeout(1000, () =>
        scoped(function* group() {
          yield* spawn(failing(boom));
          yield* sleep(100);
        }),
      ),
    "in all inside timeout": (boom) => timeout(1000, () => all([failing(boom), sleep(100)])),
    "in race inside timeout": (boom) => timeout(1000, () => race([failing(boom), sleep(100)])),
    "a timeout inside the failing child's group": (boom) =>
      scoped(function* group() {
        yield* spawn(failing(boom));
        yield* timeout(1000, sleep(100));
      }),
    "spawned directly inside shield": (boom) =>
      shield(function* flush() {
        yield* spawn(failing(boom));
        yield* sleep(100);
      }),
    "joined inside shield": (boom) =>
      shield(function* flush() {
        return yield* yield* spawn(failing(boom));
      }),
  };
  for (const [name, layout] of Object.entries(layouts)) {
    it(`${name}: the child's error at 5, nothing in its suppressed, no warning`, async () => {
      const h = createHarness();
      const boom = new Boom("child failed");
      const t = h.run(() => layout(boom));
      const error = await t.then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBe(boom);
      expect(h.eventsOf("task:settle").at(-1)?.at).toBe(5);
      expect(traces(h, error)).toEqual(noTrace);
      await h.expectClean();
    });
  }

  it("a timer that did fire still leaves its trace when an error beats it (the control)", async () => {
    const h = createHarness();
    const boom = new Boom("finally failed");
    const t = h.run(() =>
      timeout(10, function* body() {
        try {
          yield* suspend();
        } finally {
          // biome-ignore lint/correctness/noUnsafeFinally: an error beating the timeout is the case.
          throw boom;
        }
      }),
    );
    await expect(t).rejects.toBe(boom);
    const seen = traces(h, boom);
    expect(seen.suppressed.map((e) => (e as Error).name)).toEqual(["TimeoutError"]);
    expect(seen.warnings).toEqual(["error:suppressed@10", "cancel:replaced@10"]);
    await h.expectClean();
  });
});

describe("a warning means something was dropped", () => {
  it("a plain spawn and join of a failing child: the error reaches the caller, no error:suppressed", async () => {
    const h = createHarness();
    const boom = new Boom("child failed");
    const t = h.run(function* parent() {
      const c = yield* spawn(failing(boom));
      return yield* c;
    });
    await expect(t).rejects.toBe(boom);
    expect(traces(h, boom)).toEqual(noTrace);
    await h.expectClean();
  });

  it("a sibling that joins the failing child: the owner throws the error, so the sibling's replaced join is no drop", async () => {
    const h = createHarness();
    const boom = new Boom("child failed");
    const t = h.run(function* parent() {
      const c = yield* spawn(failing(boom));
      yield* spawn(function* joiner() {
        yield* c;
      });
      yield* suspend();
    });
    await expect(t).rejects.toBe(boom);
    expect(traces(h, boom)).toEqual(noTrace);
    await h.expectClean();
  });

  it("a join whose error is truly replaced by a cancellation is still reported", async () => {
    const h = createHarness();
    const boom = new Boom("other run failed");
    // A task of another run: its error reaches this joiner only, which is cancelled just before.
    let t: Task<void> | null = null;
    const other: Task<never> = h.run(function* child() {
      yield* sleep(5);
      t?.cancel();
      throw boom;
    });
    other.then(undefined, () => {});
    t = h.run(function* joiner() {
      yield* other;
    });
    await expect(t).rejects.toMatchObject({ name: "TaskCancelledError" });
    expect(h.eventsOf("error:suppressed").map((e) => [e.error, e.context])).toEqual([
      [boom, `join child#${other.id}: replaced by cancellation`],
    ]);
    await h.expectClean();
  });
});

describe("printed warnings", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("give their time as whole ms since the run started, not the clock's epoch reading", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const clock = createVirtualClock({ start: 1_796_173_436_837.9668 });
    const t = run(
      function* swallower() {
        try {
          yield* suspend();
        } catch {
          // swallowed on purpose: the warning is the case
        }
      },
      { clock },
    );
    clock.schedule(clock.now() + 12, () => {
      t.cancel();
    });
    await expect(t).rejects.toMatchObject({ name: "TaskCancelledError" });
    expect(warn.mock.calls.map((c) => c.join(" "))).toEqual([
      expect.stringMatching(/^keel: cleanup:swallow at swallower#\d+ \(12 ms after the run started\) /),
    ]);
  });
});

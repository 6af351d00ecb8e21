/**
 * The virtual clock and the harness keep working when a test installs fake timers: they schedule on
 * the host functions kept at module load, not on the (faked) globals.
 */
import { all, run, sleep, spawn, timeout } from "@keel/core";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createHarness } from "./harness.js";
import { createVirtualClock } from "./virtual-clock.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("under vi.useFakeTimers()", () => {
  it("autojump moves virtual time, and the harness's leak check returns", async () => {
    vi.useFakeTimers();
    const h = createHarness();
    const value = await h.run(function* () {
      yield* sleep(60_000);
      return yield* all([() => timeout(500, sleep(100)), sleep(200)]);
    });
    expect(value).toEqual([undefined, undefined]);
    expect(h.clock.now()).toBe(60_200);
    await h.expectClean();
  });

  it("with queueMicrotask and every timer faked, a tree of tasks still runs to its end", async () => {
    vi.useFakeTimers({
      toFake: [
        "setTimeout",
        "clearTimeout",
        "setImmediate",
        "clearImmediate",
        "setInterval",
        "queueMicrotask",
      ],
    });
    const clock = createVirtualClock();
    const order = await run(
      function* parent() {
        const seen: number[] = [];
        const children = [];
        for (const ms of [300, 100, 200]) {
          children.push(
            yield* spawn(function* child() {
              yield* sleep(ms);
              seen.push(ms);
            }),
          );
        }
        for (const c of children) yield* c;
        return seen;
      },
      { clock },
    );
    expect(order).toEqual([100, 200, 300]);
    expect(clock.now()).toBe(300);
  });
});

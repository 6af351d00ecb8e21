import { isCancelled, run, sleep, spawn, suspend, TimeoutError, timeout } from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import { describe, expect, it } from "vitest";

describe("smoke", () => {
  it("sleeps on virtual time", async () => {
    const clock = createVirtualClock();
    const v = await run(
      function* () {
        yield* sleep(1000);
        return 1;
      },
      { clock },
    );
    expect(v).toBe(1);
    expect(clock.now()).toBe(1000);
  });
  it("times out", async () => {
    const clock = createVirtualClock();
    const log: string[] = [];
    const t = run(
      function* () {
        yield* timeout(100, function* () {
          try {
            yield* sleep(1000);
          } finally {
            log.push(`body@${clock.now()}`);
          }
        });
      },
      { clock },
    );
    await expect(t).rejects.toBeInstanceOf(TimeoutError);
    expect(log).toEqual(["body@100"]);
    expect(clock.pendingTimers).toBe(0);
  });
  it("cancels subtree", async () => {
    const clock = createVirtualClock();
    const log: string[] = [];
    const t = run(
      function* P() {
        yield* spawn(function* C1() {
          try {
            yield* suspend();
          } finally {
            log.push(`c1@${clock.now()}`);
            yield* sleep(5);
            log.push(`c1done@${clock.now()}`);
          }
        });
        try {
          yield* suspend();
        } catch (e) {
          log.push(`caught ${isCancelled(e)}`);
          throw e;
        } finally {
          log.push(`P@${clock.now()}`);
        }
      },
      { clock },
    );
    await new Promise((r) => setImmediate(r));
    clock.advance(20);
    await t.cancel();
    expect(new Set(log)).toEqual(new Set(["caught true", "P@20", "c1@20", "c1done@25"]));
    expect(t.state).toBe("cancelled");
  });
});

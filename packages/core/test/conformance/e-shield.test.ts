/**
 * Conformance section E: shield (cases 36–42 of design/conformance.md; semantics §6).
 */
import {
  call,
  shield,
  sleep,
  snapshot,
  spawn,
  suspend,
  TaskCancelledError,
  type TaskSnapshot,
  TimeoutError,
  timeout,
} from "@keel/core";
import { createHarness } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { kindOf } from "../support/errors.js";
import { settleOfNamed } from "../support/events.js";
import { byInstant } from "../support/log.js";
import { cancellerAt } from "../support/timing.js";

/** Collects unhandled rejections while a test runs. */
function trackUnhandledRejections(): { readonly seen: unknown[]; stop(): void } {
  const seen: unknown[] = [];
  const listener = (reason: unknown) => {
    seen.push(reason);
  };
  process.on("unhandledRejection", listener);
  return { seen, stop: () => process.off("unhandledRejection", listener) };
}

describe("E. Shield", () => {
  it("36: a shield postpones an outside cancellation until the shielded work settles", async () => {
    const h = createHarness();
    const p = h.run(function* P() {
      try {
        try {
          yield* shield(sleep(300));
        } catch (e) {
          h.mark(`shield threw ${kindOf(e)}`);
          throw e;
        }
        h.mark("after-shield");
        yield* sleep(1000);
      } finally {
        h.mark("P.fin");
      }
    });
    cancellerAt(h, p, 100);

    await expect(p).rejects.toBeInstanceOf(TaskCancelledError);

    expect(byInstant(h.log)).toEqual(
      byInstant(["shield threw Cancelled@300", "P.fin@300", "P.cancel settled@300"]),
    );
    expect(h.log.indexOf("shield threw Cancelled@300")).toBeLessThan(h.log.indexOf("P.fin@300"));
    expect(p.state).toBe("cancelled");
    expect(settleOfNamed(h, "P")).toMatchObject({ state: "cancelled", at: 300 });
    const delays = h.eventsOf("shield:delay");
    expect(delays).toHaveLength(1);
    expect(delays[0]).toMatchObject({ taskId: p.id, at: 300, delayedMs: 200 });
    await h.expectClean();
  });

  it("36 (variant): when the shielded work fails, the caller still gets Cancelled and the error is reported", async () => {
    const h = createHarness();
    const e1 = new Error("e1");
    const p = h.run(function* P() {
      try {
        try {
          yield* shield(function* commit() {
            yield* sleep(300);
            throw e1;
          });
        } catch (e) {
          h.mark(`shield threw ${kindOf(e)}`);
          throw e;
        }
        h.mark("after-shield");
        yield* sleep(1000);
      } finally {
        h.mark("P.fin");
      }
    });
    cancellerAt(h, p, 100);

    await expect(p).rejects.toBeInstanceOf(TaskCancelledError);

    expect(byInstant(h.log)).toEqual(
      byInstant(["shield threw Cancelled@300", "P.fin@300", "P.cancel settled@300"]),
    );
    expect(p.state).toBe("cancelled");
    expect(h.eventsOf("shield:delay")).toHaveLength(1);
    const reported = h.eventsOf("error:suppressed").filter((e) => e.error === e1);
    expect(reported).toHaveLength(1);
    expect(reported[0]!.at).toBe(300);
    await h.expectClean();
  });

  it("37: a shield does not filter cancellation made inside it; the outside one arrives when it settles", async () => {
    const h = createHarness();
    const p = h.run(function* P() {
      try {
        const v = yield* shield(function* body() {
          try {
            yield* timeout(50, sleep(1000));
          } catch (e) {
            h.mark(`in:${kindOf(e)}`);
          }
          const c = yield* spawn(sleep(1000));
          yield* c.cancel();
          h.mark(`c:${c.state}`);
          return "v";
        });
        h.mark(`P got ${v}`);
      } catch (e) {
        h.mark(`P:${kindOf(e)}`);
        throw e;
      }
    });
    cancellerAt(h, p, 10);

    await expect(p).rejects.toBeInstanceOf(TaskCancelledError);

    expect(byInstant(h.log)).toEqual(
      byInstant(["in:TimeoutError@50", "c:cancelled@50", "P:Cancelled@50", "P.cancel settled@50"]),
    );
    expect(h.log.indexOf("c:cancelled@50")).toBeLessThan(h.log.indexOf("P:Cancelled@50"));
    expect(p.state).toBe("cancelled");
    expect(settleOfNamed(h, "P")).toMatchObject({ state: "cancelled", at: 50 });
    await h.expectClean();
  });

  it("38: a shield protects from interruption, not from duration", async () => {
    const h = createHarness();
    let caught: unknown;
    const t = h.run(function* caller() {
      try {
        const v = yield* timeout(100, function* () {
          return yield* shield(function* op() {
            yield* sleep(300);
            h.mark("op returns v");
            return "v";
          });
        });
        h.mark(`got ${v}`);
      } catch (e) {
        caught = e;
        h.mark(`caught ${kindOf(e)}`);
      }
    });

    await t;

    const fired = h.eventsOf("timeout:fire");
    expect(fired).toHaveLength(1);
    expect(fired[0]!.at).toBe(100);
    expect(byInstant(h.log)).toEqual(byInstant(["op returns v@300", "caught TimeoutError@300"]));
    expect(caught).toBeInstanceOf(TimeoutError);
    expect(caught).toMatchObject({ timeoutMs: 100, deadline: 100, elapsedMs: 300 });
    expect(h.eventsOf("shield:delay")).toHaveLength(1);
    await h.expectClean();
  });

  it("39: shielded work is never orphaned: it stays under the caller until the TimeoutError at 100", async () => {
    const h = createHarness();
    let caught: unknown;
    const t = h.run(function* caller() {
      try {
        yield* timeout(
          10,
          shield(function* work() {
            yield* sleep(100);
            return "done";
          }),
        );
        h.mark("returned");
      } catch (e) {
        caught = e;
        h.mark(`caught ${kindOf(e)}`);
      }
    });
    const snaps: TaskSnapshot[] = [];
    h.run(function* observer() {
      yield* sleep(11);
      snaps.push(snapshot(t));
      yield* sleep(88);
      snaps.push(snapshot(t));
    });

    await t;

    expect(h.log).toEqual(["caught TimeoutError@100"]);
    expect(caught).toBeInstanceOf(TimeoutError);
    expect(snaps).toHaveLength(2);
    for (const s of snaps) {
      expect(s).toMatchObject({
        name: "caller",
        waitingOn: expect.stringContaining("shield"),
        children: [{ name: "work", state: "running", waitingOn: "sleep(100)", children: [] }],
      });
    }
    expect(settleOfNamed(h, "work")).toMatchObject({ state: "completed", at: 100 });
    await h.expectClean();
  });

  it("39 (variant): a shielded failure after the timeout is reported as an event, never an unhandled rejection", async () => {
    const unhandled = trackUnhandledRejections();
    try {
      const h = createHarness();
      const e1 = new Error("e1");
      let caught: unknown;
      const t = h.run(function* caller() {
        try {
          yield* timeout(
            10,
            shield(function* work() {
              yield* sleep(100);
              throw e1;
            }),
          );
        } catch (e) {
          caught = e;
          h.mark(`caught ${kindOf(e)}`);
        }
      });

      await t;

      expect(h.log).toEqual(["caught TimeoutError@100"]);
      expect(caught).toBeInstanceOf(TimeoutError);
      expect(caught).not.toBe(e1);
      const reported = h.eventsOf("error:suppressed").filter((e) => e.error === e1);
      expect(reported).toHaveLength(1);
      expect(reported[0]!.at).toBe(100);
      await h.expectClean();
      await new Promise<void>((resolve) => setImmediate(resolve));
      expect(unhandled.seen).toEqual([]);
    } finally {
      unhandled.stop();
    }
  });

  it("40a: a bounded shield whose work finishes in time delivers the cancellation when it does", async () => {
    const h = createHarness();
    const p = h.run(function* P() {
      try {
        yield* shield(
          function* commit() {
            yield* sleep(500);
          },
          { limitMs: 2000 },
        );
        h.mark("after-shield");
      } catch (e) {
        h.mark(`shield threw ${kindOf(e)}`);
        throw e;
      } finally {
        h.mark("P.fin");
      }
    });
    cancellerAt(h, p, 100);

    await expect(p).rejects.toBeInstanceOf(TaskCancelledError);

    expect(byInstant(h.log)).toEqual(
      byInstant(["shield threw Cancelled@500", "P.fin@500", "P.cancel settled@500"]),
    );
    expect(p.state).toBe("cancelled");
    await h.expectClean();
  });

  it("40b: a bounded shield gives up at its limit and the caller, being cancelled, gets Cancelled", async () => {
    const h = createHarness();
    const p = h.run(function* P() {
      try {
        yield* shield(
          function* commit() {
            try {
              yield* sleep(5000);
            } finally {
              h.mark("commit.fin");
            }
          },
          { limitMs: 2000 },
        );
        h.mark("after-shield");
      } catch (e) {
        h.mark(`shield threw ${kindOf(e)}`);
        throw e;
      } finally {
        h.mark("P.fin");
      }
    });
    cancellerAt(h, p, 100);

    await expect(p).rejects.toBeInstanceOf(TaskCancelledError);

    expect(byInstant(h.log)).toEqual(
      byInstant(["commit.fin@2000", "shield threw Cancelled@2000", "P.fin@2000", "P.cancel settled@2000"]),
    );
    expect(h.log.indexOf("commit.fin@2000")).toBeLessThan(h.log.indexOf("shield threw Cancelled@2000"));
    expect(p.state).toBe("cancelled");
    expect(settleOfNamed(h, "P")).toMatchObject({ state: "cancelled", at: 2000 });
    await h.expectClean();
  });

  it("40c: a bounded shield nobody cancels throws TimeoutError at its limit", async () => {
    const h = createHarness();
    let caught: unknown;
    const p = h.run(function* P() {
      try {
        yield* shield(
          function* commit() {
            try {
              yield* sleep(5000);
            } finally {
              h.mark("commit.fin");
            }
          },
          { limitMs: 2000 },
        );
        h.mark("after-shield");
      } catch (e) {
        caught = e;
        h.mark(`shield threw ${kindOf(e)}`);
        throw e;
      } finally {
        h.mark("P.fin");
      }
    });

    await expect(p).rejects.toBeInstanceOf(TimeoutError);

    expect(byInstant(h.log)).toEqual(
      byInstant(["commit.fin@2000", "shield threw TimeoutError@2000", "P.fin@2000"]),
    );
    expect(caught).toMatchObject({ timeoutMs: 2000 });
    expect(p.state).toBe("failed");
    await h.expectClean();
  });

  it("41: shielding every handler cannot make a service unstoppable: each shield gives up at the cleanup budget", async () => {
    const h = createHarness();
    const root = h.run(function* root() {
      for (const i of [1, 2, 3]) {
        yield* spawn(
          function* handler() {
            yield* shield(function* handle() {
              yield* call(function upstream(signal: AbortSignal) {
                return new Promise<never>(() => {
                  signal.addEventListener("abort", () => h.mark(`abort:${i}`));
                });
              });
            });
          },
          { name: `handler${i}` },
        );
      }
      yield* suspend();
    });
    cancellerAt(h, root, 1000);
    const snaps: TaskSnapshot[] = [];
    h.run(function* observer() {
      yield* sleep(1001);
      snaps.push(snapshot(root));
      yield* sleep(3998);
      snaps.push(snapshot(root));
    });

    await expect(root).rejects.toBeInstanceOf(TaskCancelledError);

    expect(snaps).toHaveLength(2);
    for (const s of snaps) {
      expect(s).toMatchObject({
        name: "root",
        state: "cancelling",
        children: [1, 2, 3].map((i) => ({
          name: `handler${i}`,
          state: "cancelling",
          waitingOn: expect.stringContaining("shield"),
          children: [{ name: "handle", waitingOn: "call(upstream)" }],
        })),
      });
    }
    expect(byInstant(h.log)).toEqual(
      byInstant(["abort:1@5000", "abort:2@5000", "abort:3@5000", "root.cancel settled@5000"]),
    );
    expect(root.state).toBe("cancelled");
    const delays = h.eventsOf("shield:delay");
    expect(delays).toHaveLength(3);
    expect(delays.map((e) => e.at)).toEqual([5000, 5000, 5000]);
    await h.expectClean();
  });

  it("41 (limit): a shield with limitMs Infinity is rejected with RangeError before anything starts", async () => {
    const h = createHarness();
    let started = false;
    let caught: unknown;
    await h.run(function* caller() {
      try {
        yield* shield(
          function* op() {
            started = true;
          },
          { limitMs: Infinity },
        );
      } catch (e) {
        caught = e;
      }
    });

    expect(caught).toBeInstanceOf(RangeError);
    expect(started).toBe(false);
    expect(h.eventsOf("task:start").map((e) => e.name)).toEqual(["caller"]);
    await h.expectClean();
  });

  it("42: a shield entered while unwinding returns normally and does not stop the unwinding", async () => {
    const h = createHarness();
    const t = h.run(function* T() {
      try {
        yield* suspend();
      } finally {
        yield* shield(function* flush1() {
          yield* sleep(50);
        });
        h.mark("between");
        yield* shield(function* flush2() {
          yield* sleep(50);
        });
        h.mark("done");
      }
      h.mark("after");
    });
    cancellerAt(h, t, 10);

    await expect(t).rejects.toBeInstanceOf(TaskCancelledError);

    expect(byInstant(h.log)).toEqual(byInstant(["between@60", "done@110", "T.cancel settled@110"]));
    expect(t.state).toBe("cancelled");
    expect(settleOfNamed(h, "T")).toMatchObject({ state: "cancelled", at: 110 });
    await h.expectClean();
  });
});

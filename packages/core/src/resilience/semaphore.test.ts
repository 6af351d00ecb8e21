import {
  all,
  createSemaphore,
  type Semaphore,
  sleep,
  snapshot,
  spawn,
  suspend,
  type Task,
  TaskCancelledError,
  TimeoutError,
  timeout,
} from "@keel/core";
import { createHarness, type Harness } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { rejection } from "../../test/support/errors.js";

/** The semaphore's books in one string. */
function books(sem: Semaphore): string {
  return `available ${sem.available}, waiting ${sem.waiting}`;
}

/** A root task that sleeps `at`, then holds a permit of `sem` for `holdMs`, logging its grant. */
function holderAt(h: Harness, sem: Semaphore, who: string, at: number, holdMs: number): Task<void> {
  return h.run(
    function* holder() {
      yield* sleep(at);
      yield* sem.use(function* hold() {
        h.mark(`${who} granted`);
        yield* sleep(holdMs);
      });
    },
    { name: who },
  );
}

describe("createSemaphore", () => {
  it("grants waiting tasks in the order they arrived", async () => {
    const h = createHarness();
    const sem = createSemaphore(1);
    const tasks = [
      holderAt(h, sem, "A", 0, 100),
      holderAt(h, sem, "W3", 30, 10),
      holderAt(h, sem, "W1", 10, 10),
      holderAt(h, sem, "W4", 40, 10),
      holderAt(h, sem, "W2", 20, 10),
    ];

    await Promise.all(tasks);
    expect(h.log).toEqual([
      "A granted@0",
      "W1 granted@100",
      "W2 granted@110",
      "W3 granted@120",
      "W4 granted@130",
    ]);
    expect(books(sem)).toBe("available 1, waiting 0");
    await h.expectClean();
  });

  it("hands a released permit straight to the first waiter, so available stays 0 while anyone waits", async () => {
    const h = createHarness();
    const sem = createSemaphore(2);
    const seen: string[] = [];
    const tasks = [
      holderAt(h, sem, "A", 0, 50),
      holderAt(h, sem, "B", 0, 100),
      holderAt(h, sem, "C", 10, 100),
      holderAt(h, sem, "D", 20, 100),
    ];
    for (const at of [30, 60, 110, 160]) {
      h.clock.schedule(at, () => seen.push(`${books(sem)}@${at}`));
    }

    await Promise.all(tasks);
    expect(h.log).toEqual(["A granted@0", "B granted@0", "C granted@50", "D granted@100"]);
    expect(seen).toEqual([
      "available 0, waiting 2@30",
      "available 0, waiting 1@60",
      "available 0, waiting 0@110",
      "available 1, waiting 0@160",
    ]);
    expect(books(sem)).toBe("available 2, waiting 0");
    await h.expectClean();
  });

  it("names what a waiter waits on in the task tree: the semaphore and the queue length", async () => {
    const h = createHarness();
    const sem = createSemaphore(1, { name: "db" });
    const tasks = [
      holderAt(h, sem, "A", 0, 100),
      holderAt(h, sem, "B", 10, 10),
      holderAt(h, sem, "C", 20, 10),
    ];
    let waitingOn: (string | null)[] = [];
    h.clock.schedule(50, () => {
      waitingOn = tasks.map((t) => snapshot(t).waitingOn);
    });

    await Promise.all(tasks);
    expect(waitingOn).toEqual(["sleep(100)", "semaphore db: 2 waiting", "semaphore db: 2 waiting"]);
    expect(sem.name).toBe("db");
    expect(sem.permits).toBe(1);
    expect(books(sem)).toBe("available 1, waiting 0");
    await h.expectClean();
  });

  describe("a permit belongs to the scope that acquired it", () => {
    it("a permit acquired in a child task is released when the child ends, though the parent runs on", async () => {
      const h = createHarness();
      const sem = createSemaphore(1);
      const parent = h.run(function* parent() {
        const child = yield* spawn(function* child() {
          yield* sem.acquire();
          yield* sleep(30);
        });
        yield* child;
        h.mark("child joined");
        yield* sleep(70);
        h.mark("parent done");
      });
      const other = holderAt(h, sem, "other", 10, 10);

      await Promise.all([parent, other]);
      expect(new Set(h.log.slice(0, 2))).toEqual(new Set(["child joined@30", "other granted@30"]));
      expect(h.log.slice(2)).toEqual(["parent done@100"]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });

    it("a permit acquired inside a timeout's body is released when the timeout scope exits", async () => {
      const h = createHarness();
      const sem = createSemaphore(1);
      const seen: string[] = [];
      await h.run(function* caller() {
        yield* timeout(1000, function* body() {
          yield* sem.acquire();
          seen.push(`inside: ${books(sem)}`);
          yield* sleep(20);
        });
        seen.push(`after: ${books(sem)}@${h.clock.now()}`);
      });

      expect(seen).toEqual(["inside: available 0, waiting 0", "after: available 1, waiting 0@20"]);
      await h.expectClean();
    });

    it("a permit acquired in one all() branch is released when that branch ends", async () => {
      const h = createHarness();
      const sem = createSemaphore(1);
      await h.run(function* caller() {
        yield* all([
          function* first() {
            yield* sem.acquire();
            yield* sleep(40);
          },
          function* second() {
            yield* sleep(10);
            yield* sem.acquire();
            h.mark("second acquired");
            yield* sleep(10);
          },
        ]);
      });

      expect(h.log).toEqual(["second acquired@40"]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });

    it("use() releases only once the operation's children have stopped, after their cleanup", async () => {
      const h = createHarness();
      const sem = createSemaphore(1);
      const user = h.run(function* user() {
        const v = yield* sem.use(function* withChild() {
          yield* spawn(function* child() {
            try {
              yield* suspend();
            } finally {
              yield* sleep(30);
              h.mark("child cleaned");
            }
          });
          yield* sleep(20);
          return "v";
        });
        h.mark(`use returned ${v}`);
      });
      const other = holderAt(h, sem, "other", 10, 10);

      await Promise.all([user, other]);
      expect(h.log).toEqual(["child cleaned@50", "use returned v@50", "other granted@50"]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });

    it("use() releases when the operation throws, and the error passes through unchanged", async () => {
      const h = createHarness();
      const sem = createSemaphore(1);
      const boom = new Error("boom");
      const user = h.run(function* user() {
        yield* sem.use(function* failing() {
          yield* sleep(20);
          throw boom;
        });
      });
      const other = holderAt(h, sem, "other", 10, 10);

      expect(await rejection(user)).toBe(boom);
      await other;
      expect(h.log).toEqual(["other granted@20"]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });
  });

  describe("a grant that meets a cancellation in the same instant", () => {
    /**
     * A holds the permit until 100; B waits from 10 (and C from 20 when `withC`). At 100 A releases
     * and cancels B in one synchronous step, in the order given.
     */
    async function sameInstant(order: "release-then-cancel" | "cancel-then-release", withC: boolean) {
      const h = createHarness();
      const sem = createSemaphore(1);
      let holders = 0;
      let maxHolders = 0;
      const bodies: string[] = [];
      const holdBody = (who: string) =>
        function* hold() {
          holders++;
          maxHolders = Math.max(maxHolders, holders);
          bodies.push(`${who}@${h.clock.now()}`);
          try {
            yield* sleep(10);
          } finally {
            holders--;
          }
        };
      let b: Task<void> | null = null;
      const after: string[] = [];
      const a = h.run(function* A() {
        const p = yield* sem.acquire();
        holders++;
        maxHolders = Math.max(maxHolders, holders);
        yield* sleep(100);
        holders--;
        if (order === "release-then-cancel") {
          p.release();
          void b!.cancel();
        } else {
          void b!.cancel();
          p.release();
        }
        after.push(`sync: available ${sem.available}`);
      });
      b = h.run(function* B() {
        yield* sleep(10);
        yield* sem.use(holdBody("B"));
      });
      const c = withC
        ? h.run(function* C() {
            yield* sleep(20);
            yield* sem.use(holdBody("C"));
          })
        : null;

      await a;
      expect(await rejection(b)).toBeInstanceOf(TaskCancelledError);
      await c;
      return { h, sem, bodies, maxHolders, after };
    }

    it.each(["release-then-cancel", "cancel-then-release"] as const)(
      "%s passes the permit on to the next waiter at that instant",
      async (order) => {
        const { h, sem, bodies, maxHolders } = await sameInstant(order, true);
        expect(bodies).toEqual(["C@100"]);
        expect(maxHolders).toBe(1);
        expect(books(sem)).toBe("available 1, waiting 0");
        await h.expectClean();
      },
    );

    it.each(["release-then-cancel", "cancel-then-release"] as const)(
      "%s with nobody else waiting puts the permit back, neither lost nor duplicated",
      async (order) => {
        const { h, sem, bodies, maxHolders } = await sameInstant(order, false);
        expect(bodies).toEqual([]);
        expect(maxHolders).toBe(1);
        expect(books(sem)).toBe("available 1, waiting 0");
        await h.expectClean();
      },
    );
  });

  describe("waits are bounded by an enclosing timeout", () => {
    it("a timeout around use() ends the wait at its deadline; the body never runs and the queue empties", async () => {
      const h = createHarness();
      const sem = createSemaphore(1);
      const holder = holderAt(h, sem, "A", 0, 1000);
      let bodyRan = false;
      let caught: unknown;
      const seen: string[] = [];
      const waiter = h.run(function* waiter() {
        yield* sleep(10);
        try {
          yield* timeout(50, () =>
            sem.use(function* body() {
              bodyRan = true;
            }),
          );
        } catch (e) {
          caught = e;
          seen.push(`${books(sem)}@${h.clock.now()}`);
        }
      });

      await Promise.all([holder, waiter]);
      expect(caught).toBeInstanceOf(TimeoutError);
      expect((caught as TimeoutError).timeoutMs).toBe(50);
      expect(seen).toEqual(["available 0, waiting 0@60"]);
      expect(bodyRan).toBe(false);
      expect(h.log).toEqual(["A granted@0"]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });

    it("a travelling deadline bounds an acquire nested below the timeout", async () => {
      const h = createHarness();
      const sem = createSemaphore(1);
      const holder = holderAt(h, sem, "A", 0, 1000);
      let caughtAt = -1;
      const waiter = h.run(function* waiter() {
        try {
          yield* timeout(50, function* outer() {
            yield* sleep(20);
            const inner = yield* spawn(function* nested() {
              yield* sem.acquire();
              h.mark("nested acquired");
            });
            yield* inner;
          });
        } catch (e) {
          if (!(e instanceof TimeoutError)) throw e;
          caughtAt = h.clock.now();
        }
      });

      await Promise.all([holder, waiter]);
      expect(caughtAt).toBe(50);
      expect(h.log).toEqual(["A granted@0"]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });
  });

  describe("waiters that gave up are not kept while a permit is held", () => {
    /** Entries the semaphore still keeps in its queue (a test hook on its internals). */
    function queued(sem: Semaphore): number {
      const impl = sem as unknown as { queue: unknown[]; head: number };
      return impl.queue.length - impl.head;
    }

    it("2,000 acquires and uses that time out against one long holder leave at most a few entries", async () => {
      const h = createHarness();
      const sem = createSemaphore(1);
      const holder = holderAt(h, sem, "A", 0, 10_000);
      const counts: string[] = [];
      const waiters = h.run(function* waiters() {
        yield* sleep(1);
        for (let round = 0; round < 20; round++) {
          yield* all(
            Array.from(
              { length: 100 },
              (_, i) =>
                function* gaveUp() {
                  try {
                    yield* timeout<unknown>(5, i % 2 === 0 ? sem.acquire() : sem.use(function* body() {}));
                  } catch (e) {
                    if (!(e instanceof TimeoutError)) throw e;
                  }
                },
            ),
          );
        }
        counts.push(`${books(sem)}, queued ${queued(sem) < 64 ? "< 64" : queued(sem)}@${h.clock.now()}`);
      });

      await Promise.all([holder, waiters]);
      expect(counts).toEqual(["available 0, waiting 0, queued < 64@101"]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });

    it("a purge keeps the live waiters in their order, and waiting counts only them", async () => {
      const h = createHarness();
      const sem = createSemaphore(1);
      const holder = holderAt(h, sem, "A", 0, 100);
      const patient = [1, 2, 3].map((n) =>
        h.run(function* patientWaiter() {
          yield* sleep(n);
          yield* sem.use(function* body() {
            h.mark(`patient ${n}`);
          });
        }),
      );
      const impatient = h.run(function* impatient() {
        yield* sleep(10);
        yield* all(
          Array.from(
            { length: 200 },
            () =>
              function* gaveUp() {
                try {
                  yield* timeout(5, sem.acquire());
                } catch (e) {
                  if (!(e instanceof TimeoutError)) throw e;
                }
              },
          ),
        );
        // Fewer gone entries than the purge threshold (32) may stay; the 185 before were dropped.
        h.mark(`${books(sem)}, queued ${queued(sem)}`);
      });

      await Promise.all([holder, ...patient, impatient]);
      expect(h.log).toEqual([
        "A granted@0",
        "available 0, waiting 3, queued 18@15",
        "patient 1@100",
        "patient 2@100",
        "patient 3@100",
      ]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });
  });

  describe("bad input", () => {
    it.each([0, -1, Number.NaN, 1.5, Number.POSITIVE_INFINITY, "2", undefined])(
      "createSemaphore(%s) throws a RangeError naming permits",
      (n) => {
        const make = () => createSemaphore(n as number);
        expect(make).toThrow(RangeError);
        expect(make).toThrow(/permits/);
        expect(make).toThrow(expect.objectContaining({ code: "KEEL_INVALID_ARGUMENT" }));
      },
    );

    it("use() rejects a value that is not an operation with a TypeError, at the call", () => {
      const sem = createSemaphore(1);
      expect(() => sem.use(42 as never)).toThrow(TypeError);
      expect(() => sem.use(42 as never)).toThrow(/semaphore\.use\(op\)/);
    });

    it("use() of a function that returns no operation fails inside its scope and gives the permit back", async () => {
      const h = createHarness();
      const sem = createSemaphore(1);
      const user = h.run(function* user() {
        yield* sem.use((() => 42) as never);
      });
      const error = await rejection(user);
      expect(error).toBeInstanceOf(TypeError);
      expect(String(error)).toMatch(/a function returning an operation/);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });

    it("use() driven by hand outside any task throws KEEL_NO_TASK and takes no permit", () => {
      const sem = createSemaphore(1);
      const it = sem.use(function* body() {})[Symbol.iterator]();
      const asked = it.next(undefined);
      expect(asked.done).toBe(false);
      expect(() => it.next(undefined)).toThrow(expect.objectContaining({ code: "KEEL_NO_TASK" }));
      expect(books(sem)).toBe("available 1, waiting 0");
    });
  });

  describe("use() passes its operation through", () => {
    it("use and acquire work detached from their semaphore (passed as callbacks)", async () => {
      const h = createHarness();
      const sem = createSemaphore(1);
      const { use, acquire } = sem;
      const ops = [
        function* a() {
          return "a";
        },
        function* b() {
          return "b";
        },
      ].map(use);
      const values = await h.run(function* () {
        const permit = yield* acquire();
        permit.release();
        return yield* all(ops);
      });
      expect(values).toEqual(["a", "b"]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });

    it("returns the value, forwards every step and error to the body, and releases after its cleanup", async () => {
      const h = createHarness();
      const sem = createSemaphore(1);
      const seen: string[] = [];
      const user = h.run(function* user() {
        return yield* sem.use(function* body() {
          try {
            yield* sleep(10);
            yield* timeout(5, () => sleep(50));
          } catch (e) {
            seen.push(`caught ${(e as Error).name} at ${h.clock.now()}, ${books(sem)}`);
          } finally {
            yield* sleep(5);
            seen.push(`cleanup done at ${h.clock.now()}, ${books(sem)}`);
          }
          return "value";
        });
      });
      expect(await user).toBe("value");
      expect(seen).toEqual([
        "caught TimeoutError at 15, available 0, waiting 0",
        "cleanup done at 20, available 0, waiting 0",
      ]);
      expect(books(sem)).toBe("available 1, waiting 0");
      await h.expectClean();
    });

    it("a cancellation while the body runs unwinds it, and the next waiter is granted only after its cleanup", async () => {
      const h = createHarness();
      const sem = createSemaphore(1);
      const first = h.run(function* first() {
        yield* sem.use(function* body() {
          try {
            yield* suspend();
          } finally {
            yield* sleep(30);
            h.mark("first cleaned up");
          }
        });
      });
      const second = holderAt(h, sem, "second", 5, 10);
      await h.clock.advance(10);
      void first.cancel();
      expect(await rejection(first)).toBeInstanceOf(TaskCancelledError);
      await second;
      expect(h.log).toEqual(["first cleaned up@40", "second granted@40"]);
      await h.expectClean();
    });
  });
});

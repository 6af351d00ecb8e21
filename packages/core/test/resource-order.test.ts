/**
 * Resources outlive the tasks of their scope (semantics §2): when a scope exits, its task children
 * are cancelled and awaited first; only then are its resources torn down, newest first, each
 * bounded by the cleanup budget. Cases from issue 10, item 1, with the real HTTP client and the
 * real fault server where the issue had them, and a property over random layouts of tasks and resources.
 */
import {
  isCancelled,
  type Operation,
  resource,
  scoped,
  shield,
  sleep,
  spawn,
  suspend,
  type Task,
  TaskCancelledError,
  timeout,
} from "@keel/core";
import { createHttpClient } from "@keel/core/http";
import { createFaultServer, createHarness, type FaultServer, type Harness } from "@keel/testing";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

/** A resource that logs its teardown and refuses use once closed. */
interface Conn {
  readonly name: string;
  readonly open: boolean;
  use(what: string): void;
}

function conn(h: Harness, name: string, closeMs = 5, uses?: Conn): Operation<Conn> {
  return resource<Conn>(
    function* (provide) {
      let open = true;
      const c: Conn = {
        name,
        get open() {
          return open;
        },
        use(what) {
          if (!open) throw new Error(`${name} used after close (${what})`);
          h.mark(`${name}.use(${what})`);
        },
      };
      try {
        yield* provide(c);
      } finally {
        // A resource built on another uses it while it closes (a worker acks on its queue).
        uses?.use(`${name}.close`);
        yield* sleep(closeMs);
        open = false;
        h.mark(`${name}.closed`);
      }
    },
    { name },
  );
}

/** A task child that keeps using `c` in its `finally` for 10 ms after it is cancelled. */
function* user(c: Conn): Operation<void> {
  try {
    yield* suspend();
  } finally {
    yield* sleep(10);
    c.use("user.finally");
  }
}

describe("resources are torn down after the tasks of their scope, newest first", () => {
  it("a task's root: task children first, then three resources in reverse order of acquisition", async () => {
    const h = createHarness();
    const t = h.run(function* T() {
      const a = yield* conn(h, "A");
      const b = yield* conn(h, "B", 5, a);
      yield* spawn(() => user(b));
      const c = yield* conn(h, "C", 5, b);
      yield* spawn(() => user(c));
      yield* sleep(1);
      h.mark("body.done");
    });
    await t;
    expect(h.log).toEqual([
      "body.done@1",
      "B.use(user.finally)@11",
      "C.use(user.finally)@11",
      "B.use(C.close)@11",
      "C.closed@16",
      "A.use(B.close)@16",
      "B.closed@21",
      "A.closed@26",
    ]);
    await h.expectClean();
  });

  it("the same order when the task is cancelled from outside: its body and children unwind with the resources usable", async () => {
    const h = createHarness();
    const t = h.run(function* T() {
      const a = yield* conn(h, "A");
      const b = yield* conn(h, "B", 5, a);
      yield* spawn(() => user(a));
      try {
        yield* suspend();
      } finally {
        yield* sleep(20);
        b.use("body.finally");
      }
    });
    h.clock.schedule(100, () => {
      t.cancel();
    });
    await expect(t).rejects.toBeInstanceOf(TaskCancelledError);
    expect(h.log).toEqual([
      "A.use(user.finally)@110",
      "B.use(body.finally)@120",
      "A.use(B.close)@120",
      "B.closed@125",
      "A.closed@130",
    ]);
    await h.expectClean();
  });

  it("every combinator scope closes the same way: scoped, timeout (fired), a task's child", async () => {
    const h = createHarness();
    const t = h.run(function* T() {
      yield* scoped(function* group() {
        const a = yield* conn(h, "S");
        yield* spawn(() => user(a));
        yield* sleep(1);
      });
      h.mark("scoped.returned");
      try {
        yield* timeout(50, function* body() {
          const a = yield* conn(h, "T");
          yield* spawn(() => user(a));
          yield* suspend();
        });
      } catch (e) {
        h.mark(`timeout:${(e as Error).name}`);
      }
    });
    await t;
    expect(h.log).toEqual([
      "S.use(user.finally)@11",
      "S.closed@16",
      "scoped.returned@16",
      "T.use(user.finally)@76",
      "T.closed@81",
      "timeout:TimeoutError@81",
    ]);
    await h.expectClean();
  });

  it("each teardown is bounded by the cleanup budget: a hung one is cut, and the older ones still close", async () => {
    const h = createHarness();
    const t = h.run(
      function* T() {
        yield* conn(h, "A");
        yield* conn(h, "Hung", 60_000);
        yield* conn(h, "C");
      },
      { cleanupBudgetMs: 100 },
    );
    await t;
    // C closes at 5; Hung's close is cut by its budget at 105; A closes 5 ms later.
    expect(h.log).toEqual(["C.closed@5", "A.closed@110"]);
    expect(h.eventsOf("cleanup:overrun").map((e) => [e.path, e.at])).toEqual([
      [expect.stringMatching(/^T#\d+\/Hung#\d+$/), 105],
    ]);
    await h.expectClean();
  });

  it("a shield in a child's finally can still use the resource", async () => {
    const h = createHarness();
    const t = h.run(function* T() {
      const c = yield* conn(h, "C");
      yield* spawn(function* child() {
        try {
          yield* suspend();
        } finally {
          yield* shield(function* flush() {
            yield* sleep(30);
            c.use("shielded flush");
          });
        }
      });
      yield* suspend();
    });
    h.clock.schedule(10, () => {
      t.cancel();
    });
    await expect(t).rejects.toBeInstanceOf(TaskCancelledError);
    expect(h.log).toEqual(["C.use(shielded flush)@40", "C.closed@45"]);
    await h.expectClean();
  });

  it("a teardown that fails fails the scope, after its tasks, and the older resources still close", async () => {
    const h = createHarness();
    const boom = new Error("B teardown failed");
    const t = h.run(function* T() {
      const a = yield* conn(h, "A");
      yield* resource<void>(
        function* (provide) {
          try {
            yield* provide(undefined);
          } finally {
            a.use("B.close");
            // biome-ignore lint/correctness/noUnsafeFinally: a teardown that fails is the case.
            throw boom;
          }
        },
        { name: "B" },
      );
      yield* spawn(() => user(a));
      yield* sleep(1);
    });
    await expect(t).rejects.toBe(boom);
    expect(h.log).toEqual(["A.use(user.finally)@11", "A.use(B.close)@11", "A.closed@16"]);
    await h.expectClean();
  });
});

describe("the HTTP client is a resource: handlers' cleanup requests reach the server", () => {
  /** A fault server in a run of its own, outliving the service under test; stopped by `stop()`. */
  async function serverRun(h: Harness, routes: Parameters<typeof createFaultServer>[0]) {
    let server!: FaultServer;
    let ready!: () => void;
    const started = new Promise<void>((r) => {
      ready = r;
    });
    const task = h.run(function* faultServerScope() {
      server = yield* createFaultServer(routes, { connectHang: false });
      ready();
      yield* suspend();
    });
    await started;
    return {
      server,
      stop: async () => {
        await task.cancel();
      },
    };
  }

  it("issue 10's example: the handler's finally POST reaches the server after the service is cancelled", async () => {
    const h = createHarness();
    const { server, stop } = await serverRun(h, {
      "/slow": { delayMs: 60_000, json: {} },
      "POST /audit": { delayMs: 5, json: { ok: true } },
    });
    const baseUrl = server.url;
    let audited: unknown = "not reached";
    const task = h.run(function* service() {
      const client = yield* createHttpClient({ baseUrl });
      yield* spawn(function* handler() {
        try {
          yield* client.getJson("/slow");
        } finally {
          const res = yield* client.post("/audit", { json: {} });
          audited = yield* res.json();
        }
      });
      yield* suspend();
    });
    h.clock.schedule(50, () => {
      task.cancel();
    });
    await expect(task).rejects.toBeInstanceOf(TaskCancelledError);
    expect(audited).toEqual({ ok: true });
    expect(server.requests.map((r) => `${r.method} ${r.path}@${r.arrivedAt}`)).toEqual([
      "GET /slow@0",
      "POST /audit@50",
    ]);
    expect(h.eventsOf("error:suppressed")).toEqual([]);
    await stop();
    await h.expectClean();
  });

  it("a worker as the HTTP guide lays it out drains every in-flight job on shutdown, with no inner scoped", async () => {
    const h = createHarness();
    const jobs = 16;
    const { server, stop } = await serverRun(h, {
      "/jobs/work": { delayMs: 60_000, json: {} },
      "POST /jobs/ack": { delayMs: 5, json: { ok: true } },
    });
    const baseUrl = server.url;
    const outcomes: string[] = [];
    const worker: Task<void> = h.run(
      function* worker() {
        const client = yield* createHttpClient({ baseUrl, connections: jobs });
        for (let i = 0; i < jobs; i++) {
          yield* spawn(function* job() {
            try {
              yield* client.getJson(`/jobs/work?i=${i}`);
            } catch (e) {
              if (!isCancelled(e)) outcomes.push(`job ${i}: ${(e as Error).message}`);
              throw e;
            } finally {
              const res = yield* client.post(`/jobs/ack?i=${i}`, { json: { i, state: "requeue" } });
              yield* res.json();
              outcomes.push("acked");
            }
          });
        }
        yield* suspend();
      },
      { cleanupBudgetMs: 1000 },
    );
    h.clock.schedule(100, () => {
      worker.cancel("SIGTERM");
    });
    await expect(worker).rejects.toBeInstanceOf(TaskCancelledError);
    expect(outcomes).toEqual(Array.from({ length: jobs }, () => "acked"));
    expect(server.hits("POST /jobs/ack")).toBe(jobs);
    expect(h.eventsOf("error:suppressed")).toEqual([]);
    await stop();
    await h.expectClean();
  });
});

describe("property: whatever the layout, tasks finish before any resource closes, and resources close newest first", () => {
  const steps = fc.array(
    fc.oneof(
      fc.record({ kind: fc.constant("resource" as const), closeMs: fc.integer({ min: 0, max: 20 }) }),
      fc.record({ kind: fc.constant("task" as const), cleanupMs: fc.integer({ min: 0, max: 30 }) }),
    ),
    { minLength: 1, maxLength: 8 },
  );

  it("holds for a task's root and for a scoped group, ended by a return or a cancel", async () => {
    await fc.assert(
      fc.asyncProperty(
        steps,
        fc.boolean(),
        fc.option(fc.integer({ min: 0, max: 40 }), { nil: null }),
        async (layout, inScoped, cancelAt) => {
          const h = createHarness();
          const order: string[] = [];
          const body = function* body(): Operation<void> {
            let last: Conn | undefined;
            for (const [i, step] of layout.entries()) {
              if (step.kind === "resource") {
                const uses = last;
                last = yield* resource<Conn>(
                  function* (provide) {
                    let open = true;
                    try {
                      yield* provide({
                        name: `r${i}`,
                        get open() {
                          return open;
                        },
                        use(what) {
                          if (!open) throw new Error(`r${i} used after close (${what})`);
                        },
                      });
                    } finally {
                      order.push(`close r${i}`);
                      uses?.use(`r${i}.close`);
                      yield* sleep(step.closeMs);
                      open = false;
                    }
                  },
                  { name: `r${i}` },
                );
              } else {
                const used = last;
                yield* spawn(function* worker() {
                  try {
                    yield* sleep(1000);
                  } finally {
                    yield* sleep(step.cleanupMs);
                    used?.use(`t${i}.finally`);
                    order.push(`task t${i} done`);
                  }
                });
              }
              yield* sleep(1);
            }
            yield* sleep(20);
          };
          const t = h.run(inScoped ? () => scoped(body) : body);
          if (cancelAt !== null) h.clock.schedule(cancelAt, () => t.cancel());
          await t.then(
            () => {},
            (e: unknown) => {
              if (!(e instanceof TaskCancelledError)) throw e;
            },
          );
          const firstClose = order.findIndex((x) => x.startsWith("close"));
          const lastTask = order.findLastIndex((x) => x.startsWith("task"));
          if (firstClose >= 0 && lastTask >= 0) expect(lastTask).toBeLessThan(firstClose);
          const closes = order.filter((x) => x.startsWith("close")).map((x) => Number(x.slice(7)));
          expect(closes).toEqual([...closes].sort((a, b) => b - a));
          await h.expectClean();
        },
      ),
      { numRuns: 150 },
    );
  });
});

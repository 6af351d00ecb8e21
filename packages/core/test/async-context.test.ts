/**
 * Async context per run: every step of a task, and the promise code and timers it starts, see the
 * `AsyncLocalStorage` stores in force where its root was started (`run`), or where `scope.spawn`
 * was called. Checked with real pino (a mixin reading a storage) and real OpenTelemetry
 * (`context.active()` under the AsyncLocalStorage context manager).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import diagnosticsChannel from "node:diagnostics_channel";
import {
  action,
  all,
  type Clock,
  call,
  race,
  realClock,
  run,
  type Scope,
  sleep,
  spawn,
  suspend,
  type Task,
  timeout,
  until,
  useScope,
} from "@keel/core";
import { createHttpClient } from "@keel/core/http";
import { createFaultServer, createHarness, createVirtualClock } from "@keel/testing";
import { context, createContextKey, ROOT_CONTEXT } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const requestStore = new AsyncLocalStorage<{ reqId: string }>();
const REQ_KEY = createContextKey("keel.test.reqId");

beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
});
afterAll(() => {
  context.disable();
});

interface Line {
  expect: string;
  at: string;
  reqId: string;
  otel: string;
}

/** A pino logger writing to memory, each line stamped with both context readings by its mixin. */
function memoryLogger() {
  const raw: string[] = [];
  const log = pino(
    {
      base: null,
      timestamp: false,
      mixin: () => ({
        reqId: requestStore.getStore()?.reqId ?? "none",
        otel: (context.active().getValue(REQ_KEY) as string | undefined) ?? "none",
      }),
    },
    { write: (s: string) => void raw.push(s) },
  );
  return { log, lines: (): Line[] => raw.map((s) => JSON.parse(s) as Line) };
}

type Logger = ReturnType<typeof memoryLogger>["log"];

/** Starts `op` as a root inside request `id`'s context: both the storage and OpenTelemetry's. */
function runAs<T>(id: string, op: () => Generator<unknown, T, unknown>, clock: Clock): Task<T> {
  return requestStore.run({ reqId: id }, () =>
    context.with(ROOT_CONTEXT.setValue(REQ_KEY, id), () => run(op, { clock })),
  );
}

function wrongLines(lines: readonly Line[]): Line[] {
  return lines.filter((l) => l.reqId !== l.expect || l.otel !== l.expect);
}

/** One request: children that sleep, call promise code, wait on timers and callbacks, and join. */
function* request(log: Logger, id: string, seed: number): Generator<unknown, number, unknown> {
  log.info({ expect: id, at: "start" });
  const children: Task<number>[] = [];
  for (let k = 0; k < 3; k++) {
    children.push(
      yield* spawn(function* child() {
        yield* sleep((seed * 7 + k * 3) % 5);
        log.info({ expect: id, at: "after sleep" });
        const v = yield* call(async () => {
          log.info({ expect: id, at: "call body" });
          await new Promise<void>((resolve) => setImmediate(resolve));
          log.info({ expect: id, at: "call after setImmediate" });
          return k;
        });
        yield* until(Promise.resolve(v));
        log.info({ expect: id, at: "after until" });
        yield* action<void>((resolve) => {
          const t = setTimeout(() => {
            log.info({ expect: id, at: "timer callback" });
            resolve();
          }, 0);
          return () => clearTimeout(t);
        });
        log.info({ expect: id, at: "after action" });
        const inner = yield* timeout(1000, function* inner() {
          yield* sleep(1);
          log.info({ expect: id, at: "inside timeout" });
          return v;
        });
        return inner + (yield* race([sleepThen(log, id, 2, 1), sleepThen(log, id, 3, 0)]));
      }),
    );
  }
  const grand = yield* all([sleepThen(log, id, 1, 10), sleepThen(log, id, 2, 20)]);
  let total = grand[0] + grand[1];
  for (const t of children) total += yield* t;
  log.info({ expect: id, at: "end" });
  return total;
}

function sleepThen(log: Logger, id: string, ms: number, value: number) {
  return function* sleeper(): Generator<unknown, number, unknown> {
    yield* sleep(ms);
    log.info({ expect: id, at: `after sleep(${ms}) in a group` });
    return value;
  };
}

/** Lines one request writes when nothing is cancelled (the race's loser writes nothing). */
const LINES_PER_REQUEST = 1 + 3 * 8 + 2 + 1;

describe("async context follows each run", () => {
  it("two concurrent runs started in contexts A and B each see their own, never the other's", async () => {
    const { log, lines } = memoryLogger();
    const clock = createVirtualClock();
    const a = runAs("A", () => request(log, "A", 0), clock);
    const b = runAs("B", () => request(log, "B", 1), clock);
    expect(await Promise.all([a, b])).toEqual([36, 36]);
    const seen = lines();
    expect(seen).toHaveLength(2 * LINES_PER_REQUEST);
    expect(wrongLines(seen)).toEqual([]);
    expect(new Set(seen.map((l) => l.reqId))).toEqual(new Set(["A", "B"]));
  });

  it("50 concurrent runs on the virtual clock: 0 lines carry another run's context", async () => {
    const { log, lines } = memoryLogger();
    const clock = createVirtualClock();
    const ids = Array.from({ length: 50 }, (_, i) => `req-${i}`);
    const tasks = ids.map((id, i) => runAs(id, () => request(log, id, i), clock));
    await Promise.all(tasks);
    const seen = lines();
    expect(seen).toHaveLength(50 * LINES_PER_REQUEST);
    expect(wrongLines(seen)).toEqual([]);
  });

  it("50 concurrent runs on the real clock: 0 lines carry another run's context", async () => {
    const { log, lines } = memoryLogger();
    const ids = Array.from({ length: 50 }, (_, i) => `req-${i}`);
    const tasks = ids.map((id, i) => runAs(id, () => request(log, id, i), realClock));
    await Promise.all(tasks);
    const seen = lines();
    expect(seen).toHaveLength(50 * LINES_PER_REQUEST);
    expect(wrongLines(seen)).toEqual([]);
  });

  it("a task cancelled from another run's step unwinds in its own context", async () => {
    const { log, lines } = memoryLogger();
    const clock = createVirtualClock();
    const victim = runAs(
      "victim",
      function* victim() {
        try {
          yield* sleep(1000);
        } finally {
          log.info({ expect: "victim", at: "finally" });
          yield* sleep(1);
          log.info({ expect: "victim", at: "finally after sleep" });
        }
      },
      clock,
    );
    await runAs(
      "killer",
      function* killer() {
        yield* sleep(5);
        yield* until(victim.cancel());
        log.info({ expect: "killer", at: "after cancel" });
      },
      clock,
    );
    await expect(victim).rejects.toThrow();
    expect(lines().map((l) => l.at)).toEqual(["finally", "finally after sleep", "after cancel"]);
    expect(wrongLines(lines())).toEqual([]);
  });

  it("a cleanup budget that runs out reports in the cancelled task's context (real clock)", async () => {
    const overrunSeenBy: string[] = [];
    const victim = requestStore.run({ reqId: "victim" }, () =>
      run(
        function* victim() {
          try {
            yield* suspend();
          } finally {
            yield* suspend(); // a cleanup that never ends: cut by its 20 ms budget
          }
        },
        {
          cleanupBudgetMs: 20,
          onEvent: (e) => {
            if (e.type === "cleanup:overrun") overrunSeenBy.push(requestStore.getStore()?.reqId ?? "none");
          },
        },
      ),
    );
    await new Promise<void>((resolve) => setImmediate(resolve));
    await requestStore.run({ reqId: "canceller" }, () => victim.cancel());
    expect(overrunSeenBy).toEqual(["victim"]);
  });

  it("scope.spawn from a callback runs the child in the callback's context, and spawn in its parent's", async () => {
    const { log, lines } = memoryLogger();
    const clock = createVirtualClock();
    let scope: Scope | undefined;
    let dispatched!: () => void;
    const allDispatched = new Promise<void>((resolve) => {
      dispatched = resolve;
    });
    const server = runAs(
      "server",
      function* server() {
        scope = yield* useScope();
        yield* until(allDispatched);
        yield* sleep(50);
        log.info({ expect: "server", at: "server end" });
      },
      clock,
    );
    await new Promise<void>((resolve) => setImmediate(resolve));
    const requests = ["r1", "r2"].map((id) =>
      runAs(
        id,
        function* onRequest() {
          // A request handler (here: a task of another run) hands work to the server's scope.
          scope!.spawn(function* handler() {
            log.info({ expect: id, at: "handler" });
            const grandchild = yield* spawn(function* grandchild() {
              yield* sleep(1);
              log.info({ expect: id, at: "grandchild" });
            });
            yield* grandchild;
          });
        },
        clock,
      ),
    );
    await Promise.all(requests);
    // And from a host callback (a timer armed inside request r3's context).
    await requestStore.run({ reqId: "r3" }, () =>
      context.with(
        ROOT_CONTEXT.setValue(REQ_KEY, "r3"),
        () =>
          new Promise<void>((resolve) =>
            setImmediate(() => {
              scope!.spawn(function* fromCallback() {
                log.info({ expect: "r3", at: "handler" });
              });
              resolve();
            }),
          ),
      ),
    );
    dispatched();
    await server;
    expect(lines()).toHaveLength(6);
    expect(wrongLines(lines())).toEqual([]);
  });
});

describe("async context across HTTP", () => {
  it("undici sees each run's context when it creates the request, and the task sees it after the response", async () => {
    const { log, lines } = memoryLogger();
    const h = createHarness();
    // What OpenTelemetry's undici instrumentation does: read the active context at request creation.
    const atCreate: string[] = [];
    const onCreate = (message: unknown) => {
      const path = (message as { request: { path: string } }).request.path;
      atCreate.push(`${path.split("=")[1]}:${requestStore.getStore()?.reqId ?? "none"}`);
    };
    diagnosticsChannel.subscribe("undici:request:create", onCreate);
    try {
      let url!: (u: string) => void;
      const serverUrl = new Promise<string>((resolve) => {
        url = resolve;
      });
      let stop!: () => void;
      const stopped = new Promise<void>((resolve) => {
        stop = resolve;
      });
      const server = h.run(function* server() {
        const fault = yield* createFaultServer({ "/item": { json: { ok: true } } }, { connectHang: false });
        url(fault.url);
        yield* until(stopped);
      });
      const baseUrl = await serverUrl;
      const ids = Array.from({ length: 10 }, (_, i) => `r${i}`);
      await Promise.all(
        ids.map((id) =>
          requestStore.run({ reqId: id }, () =>
            context.with(ROOT_CONTEXT.setValue(REQ_KEY, id), () =>
              h.run(function* client() {
                const http = yield* createHttpClient({ baseUrl, retry: false });
                for (let k = 0; k < 3; k++) {
                  yield* http.getJson(`/item?id=${id}`);
                  log.info({ expect: id, at: "after getJson" });
                }
              }),
            ),
          ),
        ),
      );
      stop();
      await server;
      expect(lines()).toHaveLength(30);
      expect(wrongLines(lines())).toEqual([]);
      expect(atCreate).toHaveLength(30);
      expect(atCreate.filter((x) => x.split(":")[0] !== x.split(":")[1])).toEqual([]);
      await h.expectClean();
    } finally {
      diagnosticsChannel.unsubscribe("undici:request:create", onCreate);
    }
  });
});

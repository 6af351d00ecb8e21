/**
 * Async context: each task sees the `AsyncLocalStorage` store in force where its root was started,
 * and so does the promise code it calls; `scope.spawn` takes the caller's.
 */
import assert from "node:assert/strict";
import { AsyncLocalStorage } from "node:async_hooks";
import { call, type Scope, sleep, spawn, until, useScope } from "@keel/core";
import { createHarness } from "@keel/testing";

const request = new AsyncLocalStorage<{ reqId: string }>();
const lines: string[] = [];
/** What a logger's mixin (pino's `mixin`, an OpenTelemetry span lookup) would read. */
const log = (what: string) => lines.push(`${request.getStore()?.reqId ?? "none"}: ${what}`);

// 1. Two requests run at once, interleaving on one scheduler: each sees its own store, in its
//    children, after every sleep, and inside the promise code it calls.
{
  const h = createHarness();
  function* handle(ms: number) {
    const child = yield* spawn(function* audit() {
      yield* sleep(ms);
      log("audit");
    });
    yield* call(async () => {
      await new Promise((resolve) => setImmediate(resolve));
      log("call");
    });
    yield* child;
    log("done");
  }
  const a = request.run({ reqId: "A" }, () => h.run(() => handle(20)));
  const b = request.run({ reqId: "B" }, () => h.run(() => handle(10)));
  await Promise.all([a, b]);
  assert.deepEqual(lines.sort(), ["A: audit", "A: call", "A: done", "B: audit", "B: call", "B: done"]);
  await h.expectClean();
}

// 2. scope.spawn from a callback: the task runs in the context of the callback that started it
//    (a request handler of a long-running server), not in the server's.
{
  lines.length = 0;
  const h = createHarness();
  let scope!: Scope;
  let ready!: () => void;
  const handlersStarted = new Promise<void>((resolve) => {
    ready = resolve;
  });
  const server = request.run({ reqId: "server" }, () =>
    h.run(function* server() {
      scope = yield* useScope();
      yield* until(handlersStarted);
      yield* sleep(10); // then it stops: its scope cancels the handlers still running
      log("server stops");
    }),
  );
  await new Promise((resolve) => setImmediate(resolve)); // the server has its scope
  for (const reqId of ["r1", "r2"]) {
    request.run({ reqId }, () =>
      scope.spawn(function* handler() {
        yield* sleep(5);
        log("handled");
      }),
    );
  }
  ready();
  await server;
  assert.deepEqual(lines, ["r1: handled", "r2: handled", "server: server stops"]);
  await h.expectClean();
}

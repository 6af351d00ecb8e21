/**
 * The four HTTP timeouts, one phase each: connect (queueing for a pooled connection included),
 * headers, body idle (the longest gap between chunks) and total; what each one misses (a server that
 * trickles a byte at a time defeats the idle limit, not the total or the caller's deadline); and the
 * caller's deadline over all of them.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { isCancelled, isTimeoutError, run, sleep, spawn, timeout, timeoutAt } from "@keel/core";
import { createHttpClient, HttpTimeoutError, type HttpTimeouts, httpTimeoutCodes } from "@keel/core/http";
import { createHarness } from "@keel/testing";

const server = createServer((req, res) => {
  req.on("error", () => {}); // the client destroys sockets on purpose here
  if (req.url === "/hang") return; // accepts the request, never answers
  if (req.url === "/stall") {
    res.writeHead(200);
    res.write("first chunk"); // then silence
    return;
  }
  if (req.url === "/trickle") {
    // One byte every 5 ms, for ever: never idle for long, never done.
    res.writeHead(200);
    const drip = setInterval(() => res.write("."), 5);
    res.on("close", () => clearInterval(drip));
    return;
  }
  res.end("ok");
});
server.listen(0, "127.0.0.1");
await once(server, "listening");
const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

await run(function* timeouts() {
  // One connection, and no retries: each phase on its own.
  const client = yield* createHttpClient({ baseUrl, connections: 1, retry: false });

  /** Runs a GET to `path` and reads its body; returns the error it ends with. */
  function* failure(path: string, limits: HttpTimeouts) {
    try {
      const res = yield* client.get(path, { timeouts: limits });
      yield* res.text();
    } catch (e) {
      if (isCancelled(e)) throw e; // a cancellation is not a result: let it through
      return e;
    }
    throw new Error(`GET ${path} succeeded`);
  }
  const show = (e: unknown) => {
    assert.ok(e instanceof HttpTimeoutError);
    assert.equal(e.code, httpTimeoutCodes[e.phase]);
    console.log(`${e.phase.padEnd(7)} ${e.code.padEnd(26)} ${e.message}`);
    return e;
  };

  // 1. connect: the only connection is busy with a slow request, so the next one waits in the pool's
  //    queue. That wait is part of the connect phase. (Real sockets and the real clock: the limits
  //    leave room for a busy machine.)
  const hog = yield* spawn(function* slowRequest() {
    return yield* failure("/hang", { headersMs: 400 });
  });
  yield* sleep(5);
  const connect = show(yield* failure("/fast", { connectMs: 100 }));
  assert.equal(connect.phase, "connect");
  assert.equal(show(yield* hog).phase, "headers");
  // The queued request was dropped, not sent later: the connection serves the next one.
  assert.equal(yield* (yield* client.get("/fast")).text(), "ok");

  // 2. headers: connected and sent, but no status line and headers within headersMs.
  assert.equal(show(yield* failure("/hang", { headersMs: 20 })).phase, "headers");

  // 3. body idle: headers arrived, then no chunk for bodyIdleMs.
  assert.equal(show(yield* failure("/stall", { bodyIdleMs: 20 })).phase, "body");

  // 4. A trickle: a byte every 5 ms never leaves a gap of 300 ms, so the idle limit never fires.
  //    Only the total (or the caller's deadline) ends it.
  const total = show(yield* failure("/trickle", { bodyIdleMs: 300, totalMs: 500 }));
  assert.equal(total.phase, "total");
  assert.equal(total.timeoutMs, 500);

  // 5. The caller's deadline is earlier than every phase: it wins, and the caller gets its own
  //    TimeoutError (not an HttpTimeoutError) from its own scope.
  let outer: unknown = null;
  try {
    yield* timeout(400, () => failure("/trickle", { bodyIdleMs: 300 }));
  } catch (e) {
    outer = e;
  }
  assert.ok(isTimeoutError(outer) && !(outer instanceof HttpTimeoutError));
  assert.equal(outer.label, "timeout(400)");
  console.log(`caller  ${outer.code.padEnd(26)} ${outer.message}`);
});

// 6. Equal deadlines: the outer claim wins. On a virtual clock two deadlines can be exactly equal
//    (nothing answers /hang, so time jumps straight to the timers).
{
  const h = createHarness();
  const task = h.run(function* equalDeadlines() {
    const client = yield* createHttpClient({ baseUrl, retry: false });
    // totalMs and the caller's deadline both fall due at 100: the caller's scope is outside.
    try {
      yield* timeoutAt(100, () => client.get("/hang", { timeouts: { totalMs: 100 } }));
    } catch (e) {
      assert.ok(isTimeoutError(e) && !(e instanceof HttpTimeoutError));
      h.mark(`the caller's ${e.label}`);
    }
    // headersMs and totalMs both fall due 100 ms on: the total is outside the phase.
    try {
      yield* client.get("/hang", { timeouts: { headersMs: 100, totalMs: 100 } });
    } catch (e) {
      assert.ok(e instanceof HttpTimeoutError);
      h.mark(`the client's ${e.phase}`);
    }
  });
  await task;
  assert.deepEqual(h.log, ["the caller's timeoutAt(100)@100", "the client's total@200"]);
  console.log(`equal deadlines: ${h.log.join(", ")}`);
  await h.expectClean();
}

server.closeAllConnections();
server.close();
await once(server, "close");
console.log("http-timeouts: ok");

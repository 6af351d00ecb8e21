/**
 * HTTP timeouts and the client's retries: a phase timeout fails the attempt, and the attempt is
 * retried like any transient failure (each attempt gets fresh phase limits), unless it was a POST
 * that may have reached the server. `totalMs` is over all attempts and pauses.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { constant, isRetryExhaustedError, isTimeoutError, run, sleep, spawn } from "@keel/core";
import { createHttpClient, HttpTimeoutError } from "@keel/core/http";

const calls = new Map<string, number>();
const server = createServer((req, res) => {
  const key = `${req.method} ${req.url}`;
  const n = (calls.get(key) ?? 0) + 1;
  calls.set(key, n);
  req.on("error", () => {}); // the client destroys sockets on purpose here
  if (req.url === "/hang") return; // never answers
  if (req.url === "/slow-once" && n === 1) return; // the first call never gets an answer
  res.end('{"ok":true}');
});
server.listen(0, "127.0.0.1");
await once(server, "listening");
const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

const requests: string[] = []; // every attempt the client starts (the http:request events)
await run(
  function* retriesAndTimeouts() {
    const client = yield* createHttpClient({
      baseUrl,
      connections: 1,
      retry: { attempts: 3, backoff: constant(5) },
    });

    // 1. An HttpTimeoutError is a TimeoutError: the same guard recognises both.
    let headers: unknown = null;
    try {
      yield* client.post("/hang", { body: "x", timeouts: { headersMs: 100 } });
    } catch (e) {
      headers = e;
    }
    assert.ok(headers instanceof HttpTimeoutError && headers.phase === "headers");
    assert.ok(isTimeoutError(headers), "isTimeoutError(an HttpTimeoutError)");
    // ... and this POST was sent, so it is not sent again: one call.
    assert.equal(calls.get("POST /hang"), 1);
    console.log("POST, headers timeout: 1 call (it reached the server)");

    // 2. A GET whose attempt hit its headers timeout is retried, with fresh limits; the second call
    //    answers.
    const value = yield* client.getJson("/slow-once", { timeouts: { headersMs: 100 } });
    assert.deepEqual(value, { ok: true });
    assert.equal(calls.get("GET /slow-once"), 2);
    console.log("GET, headers timeout on attempt 1: retried, attempt 2 answered");

    // 3. A POST that timed out while queued for a connection never reached the server: retried.
    const hog = yield* spawn(function* hog() {
      yield* client.get("/hang", { retry: false });
    });
    yield* sleep(5);
    let queued: unknown = null;
    try {
      yield* client.post("/pay", { body: "x", timeouts: { connectMs: 10 } });
    } catch (e) {
      queued = e;
    }
    yield* hog.cancel();
    assert.ok(isRetryExhaustedError(queued));
    assert.equal(queued.attempts, 3);
    assert.ok(queued.cause instanceof HttpTimeoutError && queued.cause.phase === "connect");
    assert.equal(calls.get("POST /pay"), undefined); // the server never saw it
    console.log("POST, connect timeout in the queue: 3 attempts, the server saw none");

    // 4. totalMs covers every attempt and pause: attempt 1 hits its 300 ms headers limit, attempt 2
    //    starts after a 5 ms pause, and the 500 ms total ends the call during attempt 2. (Wide
    //    margins: this runs on the real clock, on machines that may be busy.)
    const attemptsBefore = requests.length;
    let total: unknown = null;
    try {
      yield* client.get("/hang", { timeouts: { headersMs: 300, totalMs: 500 } });
    } catch (e) {
      total = e;
    }
    assert.ok(total instanceof HttpTimeoutError && total.phase === "total");
    assert.equal(requests.length - attemptsBefore, 2);
    console.log(`GET, headers 300 ms, total 500 ms: 2 attempts, then ${total.message}`);
  },
  { onEvent: (e) => e.type === "http:request" && requests.push(e.url) },
);

server.closeAllConnections();
server.close();
await once(server, "close");
console.log("http-timeouts-retry: ok");

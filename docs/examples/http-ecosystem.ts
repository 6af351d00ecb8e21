/**
 * The HTTP client with undici's ecosystem: a hook around every attempt (a rate limiter and a
 * circuit breaker, retries included), pool statistics, a dispatcher of your own (undici's
 * MockAgent), and the limit on a body read whole.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { constant, createCircuitBreaker, createRateLimiter, run } from "@keel/core";
import { createHttpClient, type HttpAttemptHook, HttpResponseTooLargeError } from "@keel/core/http";
import { MockAgent } from "undici";

let calls = 0;
const server = createServer((req, res) => {
  calls++;
  if (req.url === "/export") return void res.end("x".repeat(4096));
  res.statusCode = calls === 1 ? 503 : 200; // the first call is shed, the retry answers
  res.end(JSON.stringify({ id: 7 }));
});
server.listen(0, "127.0.0.1");
await once(server, "listening");
const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

// 1. around: every attempt, the client's own retries included, takes a token and passes the breaker.
const limiter = createRateLimiter({ perSecond: 100, burst: 1 });
const breaker = createCircuitBreaker({ name: "orders", failureThreshold: 5, halfOpenAfterMs: 10_000 });
const log: string[] = [];
const around: HttpAttemptHook = function* (attempt, info) {
  yield* limiter.take();
  log.push(`${info.label} attempt ${info.attempt}`);
  return yield* breaker.run(attempt);
};

const seen = await run(function* () {
  const client = yield* createHttpClient({
    baseUrl,
    around,
    retry: { attempts: 3, backoff: constant(5) },
    maxResponseBytes: 1024,
  });
  const order = yield* client.getJson("/orders/7");
  // 2. Pool statistics, summed and per origin.
  const { connected, running, size } = client.stats();
  // 4. A body read whole is limited; the socket it came on is destroyed, not pooled.
  let tooLarge = "";
  try {
    yield* (yield* client.get("/export")).text();
  } catch (e) {
    if (!(e instanceof HttpResponseTooLargeError)) throw e;
    tooLarge = e.message;
  }
  return { order, stats: { connected, running, size }, tooLarge };
});
console.log(seen);
console.log(log);
assert.deepEqual(seen.order, { id: 7 });
assert.deepEqual(log, ["GET /orders/7 attempt 1", "GET /orders/7 attempt 2", "GET /export attempt 1"]);
assert.deepEqual(seen.stats, { connected: 1, running: 0, size: 0 });
assert.match(seen.tooLarge, /over maxResponseBytes 1024/);
server.close();

// 3. A dispatcher of your own: undici's MockAgent answers instead of the network.
const mock = new MockAgent();
mock.disableNetConnect();
mock.get("http://orders.internal").intercept({ path: "/orders/8" }).reply(200, { id: 8 });
const mocked = await run(function* () {
  const client = yield* createHttpClient({ baseUrl: "http://orders.internal", dispatcher: mock });
  return yield* client.getJson("/orders/8");
});
console.log(mocked);
assert.deepEqual(mocked, { id: 8 });
await mock.close(); // the dispatcher is yours: the client's end does not close it

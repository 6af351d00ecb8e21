/**
 * POST and PATCH are retried only when the request provably never reached the server, or when it
 * carries an idempotency key (the same on every attempt). GET, PUT and DELETE are retried as usual.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { constant, isRetryExhaustedError, type Operation, run } from "@keel/core";
import { createHttpClient, isHttpError } from "@keel/core/http";

const received: string[] = [];
const server = createServer((req, res) => {
  let body = "";
  req.on("data", (chunk) => (body += chunk));
  req.on("end", () => {
    received.push(`${req.method} ${req.url} key=${req.headers["idempotency-key"] ?? "-"} ${body}`);
    res.statusCode = 503; // always overloaded
    res.end("try later");
  });
});
server.listen(0, "127.0.0.1");
await once(server, "listening");
const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

// A port where nothing listens: connecting is refused, so no request can have reached anyone.
const gone = createServer().listen(0, "127.0.0.1");
await once(gone, "listening");
const refusedUrl = `http://127.0.0.1:${(gone.address() as AddressInfo).port}/payments`;
gone.close();
await once(gone, "close");

/** Runs `op` and returns what it threw, and what the server received meanwhile. */
function* outcome(op: () => Operation<unknown>) {
  const before = received.length;
  try {
    yield* op();
    return { error: null as unknown, received: received.slice(before) };
  } catch (error) {
    return { error, received: received.slice(before) };
  }
}

await run(function* payments() {
  const client = yield* createHttpClient({ baseUrl, retry: { attempts: 3, backoff: constant(5) } });

  // 1. A POST that reached the server is not sent again: the 503 comes back as it is, after one call.
  //    (The error still says retryable: true, because the status is; see the guide.)
  {
    const r = yield* outcome(() => client.post("/payments", { json: { amount: 10 } }));
    assert.ok(isHttpError(r.error));
    assert.equal(r.error.status, 503);
    assert.deepEqual(r.received, ['POST /payments key=- {"amount":10}']);
    console.log(`POST, no key: 1 call, ${r.error.message}`);
  }

  // 2. The same POST with an idempotency key is retried, and every attempt carries the same key,
  //    so the server can recognise a repeat.
  {
    const r = yield* outcome(() =>
      client.post("/payments", { json: { amount: 10 }, idempotencyKey: "pay-2024-0001" }),
    );
    assert.ok(isRetryExhaustedError(r.error));
    assert.equal(r.error.attempts, 3);
    assert.deepEqual(r.received, Array(3).fill('POST /payments key=pay-2024-0001 {"amount":10}'));
    console.log(`POST with idempotencyKey: ${r.received.length} calls, one key`);
  }

  // 3. PATCH is treated like POST; PUT is idempotent by definition and is retried.
  {
    const patch = yield* outcome(() => client.patch("/payments/1", { json: { note: "x" } }));
    const put = yield* outcome(() => client.put("/payments/1", { json: { note: "x" } }));
    assert.ok(isHttpError(patch.error));
    assert.equal(patch.received.length, 1);
    assert.ok(isRetryExhaustedError(put.error));
    assert.equal(put.received.length, 3);
    console.log(`PATCH: ${patch.received.length} call; PUT: ${put.received.length} calls`);
  }

  // 4. A POST whose connection was refused never reached a server: it is safe to send again.
  {
    const r = yield* outcome(() => client.post(refusedUrl, { json: { amount: 10 } }));
    assert.ok(isRetryExhaustedError(r.error));
    assert.equal(r.error.attempts, 3);
    assert.equal((r.error.cause as { code?: string }).code, "ECONNREFUSED");
    console.log(`POST to a refused port: ${r.error.attempts} attempts, cause ECONNREFUSED`);
  }
});

server.close();
await once(server, "close");
console.log("http-post: ok");

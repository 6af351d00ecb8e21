/**
 * The canonical HTTP integration, step by step: one client for the process, a request that validates
 * the status, retries with jittered backoff under the caller's deadline, the remaining budget sent
 * downstream, and the pool closed when the scope that created the client ends.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { exponential, type RetryInfo, run, timeout } from "@keel/core";
import { createHttpClient, type HttpClient, isHttpError } from "@keel/core/http";

// The service we integrate with: /orders/7 answers 503 twice (it is warming up), then the order;
// /orders/404 does not exist and says so at length.
const seen: { url: string; budget: number }[] = [];
const sockets = new Set<Socket>();
let warmingUp = 2;
const server = createServer((req, res) => {
  seen.push({ url: req.url!, budget: Number(req.headers["x-deadline-ms"]) });
  if (req.url === "/orders/7") {
    if (warmingUp-- > 0) {
      res.statusCode = 503;
      res.end("warming up");
    } else {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ id: 7, total: 42 }));
    }
    return;
  }
  res.statusCode = 404;
  res.end(`no such order\n${"details ".repeat(1000)}`);
});
server.on("connection", (socket) => {
  sockets.add(socket);
  socket.on("close", () => sockets.delete(socket));
});
server.listen(0, "127.0.0.1");
await once(server, "listening");
const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

interface Order {
  id: number;
  total: number;
}

// 2. The call itself takes the client as a parameter: it never creates one of its own.
function* getOrder(client: HttpClient, id: number) {
  return yield* client.getJson<Order>(`/orders/${id}`);
}

const pauses: RetryInfo[] = [];
const outcome = await run(
  function* service() {
    // 1. One client for the process, created where its lifetime begins. It is a resource: its
    //    connection pool closes when this scope ends, on every path.
    const client = yield* createHttpClient({
      baseUrl,
      connections: 4,
      timeouts: { connectMs: 1000, headersMs: 1000, bodyIdleMs: 1000, totalMs: 2000 },
      // 3. Retries: 3 attempts, each bounded by perAttemptMs, with full-jitter exponential pauses.
      retry: {
        attempts: 3,
        perAttemptMs: 300,
        backoff: exponential({ baseMs: 10, maxMs: 40 }),
        onRetry: (info) => pauses.push(info),
      },
      // 4. Every attempt tells the service how long we will still wait for it.
      deadlineHeader: "x-deadline-ms",
    });
    // 3. The caller's deadline bounds everything below it, retries and pauses included.
    const order = yield* timeout(1000, () => getOrder(client, 7));
    let missing: unknown = null;
    try {
      yield* timeout(1000, () => getOrder(client, 404));
    } catch (e) {
      missing = e;
    }
    return { order, missing };
  },
  { random: () => 0.5 }, // pins the jitter, so the pauses below are exact
);

// The 503s were retried; the third attempt got the order.
assert.deepEqual(outcome.order, { id: 7, total: 42 });
assert.deepEqual(
  seen.filter((s) => s.url === "/orders/7").map((s) => s.url),
  ["/orders/7", "/orders/7", "/orders/7"],
);
// Full jitter at a draw of 0.5: half of 10, then half of 20.
assert.deepEqual(
  pauses.map((p) => [p.attempt, p.delayMs, p.delayReason]),
  [
    [1, 5, "backoff"],
    [2, 10, "backoff"],
  ],
);
console.log(
  `order 7 after ${pauses.length} retries: pauses ${pauses.map((p) => `${p.delayMs} ms`).join(", ")}`,
);

// The 404 failed at once: one call, an HttpError that is not retryable, with 2 KiB of the body.
const missing = outcome.missing;
assert.ok(isHttpError(missing));
assert.equal(missing.status, 404);
assert.equal(missing.retryable, false);
assert.equal(Buffer.byteLength(missing.bodyExcerpt), 2048);
assert.ok(missing.bodyExcerpt.startsWith("no such order\n"));
assert.equal(seen.filter((s) => s.url === "/orders/404").length, 1);
console.log(`404: ${missing.message} (retryable: ${missing.retryable}, excerpt of 2048 bytes)`);

// The header carried the tightest limit in force: the attempt's 300 ms, a little less each time.
for (const { budget } of seen) assert.ok(budget > 0 && budget <= 300, `x-deadline-ms: ${budget}`);
console.log(`x-deadline-ms sent: ${seen.map((s) => s.budget).join(", ")}`);

// The client's scope has ended, so its pool is closed: the server sees every connection go.
await Promise.all([...sockets].map((s) => once(s, "close")));
assert.equal(sockets.size, 0);
console.log("the pool closed with the scope that created the client");

server.close();
await once(server, "close");
console.log("http-client: ok");

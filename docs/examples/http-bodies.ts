/**
 * A response body belongs to the scope that made the request: read it there. `getJson` reads and
 * parses inside the request, so a body that fails half-way is retried with it. Cancelling at any
 * phase destroys the socket, so a half-read connection never goes back to the pool.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { run, scoped, sleep, snapshot, spawn, timeout, until } from "@keel/core";
import { createHttpClient, type HttpResponse } from "@keel/core/http";

// Which server-side socket carried each request, and a promise for each request's arrival.
const carriedBy = new Map<string, Socket>();
const arrivals = new Map<string, () => void>();
const arrived = (url: string) => new Promise<void>((resolve) => arrivals.set(url, resolve));
let cutOnce = true;
let cutCalls = 0;
const server = createServer((req, res) => {
  carriedBy.set(req.url!, req.socket);
  arrivals.get(req.url!)?.();
  req.on("error", () => {}); // the client destroys sockets on purpose here
  const path = req.url!.split("?")[0];
  const order = JSON.stringify({ id: 7, lines: ["tea", "cups"] });
  if (path === "/hang") return; // headers never come
  if (path === "/half") {
    // Headers and the first part of the body, then nothing.
    res.writeHead(200, { "content-length": String(order.length) });
    res.write(order.slice(0, 10));
    return;
  }
  if (path === "/cut-once") {
    cutCalls++;
    // The first time, the connection drops half-way through the body.
    res.writeHead(200, { "content-length": String(order.length) });
    res.write(order.slice(0, 10));
    if (cutOnce) {
      cutOnce = false;
      setImmediate(() => req.socket.destroy());
    } else res.end(order.slice(10));
    return;
  }
  res.end(order);
});
server.listen(0, "127.0.0.1");
await once(server, "listening");
const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
/** Waits (up to a second) until the server sees the socket that carried `url` close. */
const socketClosed = (url: string) => {
  const socket = carriedBy.get(url)!;
  return timeout(1000, until<unknown>(socket.destroyed ? Promise.resolve() : once(socket, "close")));
};

await run(function* orders() {
  const client = yield* createHttpClient({ baseUrl });

  // 1. Read the body inside the scope that made the request.
  {
    const res = yield* client.get("/orders/7");
    assert.deepEqual(yield* res.json(), { id: 7, lines: ["tea", "cups"] });
    yield* sleep(5);
    assert.ok(!carriedBy.get("/orders/7")!.destroyed); // read to the end: the socket stays pooled
    console.log("read in its scope: ok, and the connection stays in the pool");
  }

  // 2. A response carried out of its scope cannot be read: the scope released the body when it
  //    ended, and destroyed the socket, which still had a body coming.
  {
    const res: HttpResponse = yield* scoped(function* lookup() {
      return yield* client.get("/half");
    });
    yield* socketClosed("/half");
    let error: unknown = null;
    try {
      yield* res.text();
    } catch (e) {
      error = e;
    }
    assert.equal((error as { code?: string }).code, "KEEL_BODY_RELEASED");
    console.log(`read after its scope: ${(error as Error).message}`);
  }

  // 3. getJson is request, status check and parse in one: the dropped body is retried with the
  //    request, and the second attempt succeeds. The same failure after get() is the caller's.
  {
    assert.deepEqual(yield* client.getJson("/cut-once"), { id: 7, lines: ["tea", "cups"] });
    assert.equal(cutCalls, 2);
    console.log("getJson: the body dropped half-way, the whole request was retried");
    cutOnce = true;
    cutCalls = 0;
    const res = yield* client.get("/cut-once");
    let error: unknown = null;
    try {
      yield* res.json();
    } catch (e) {
      error = e;
    }
    assert.equal((error as { code?: string }).code, "UND_ERR_SOCKET");
    assert.equal(cutCalls, 1);
    console.log("get() then json(): the same drop is thrown to the caller, not retried");
  }

  // 4. Cancelled while waiting for headers: the socket is destroyed.
  {
    const waiting = yield* spawn(function* listOrders() {
      yield* client.get("/hang");
    });
    yield* until(arrived("/hang"));
    yield* waiting.cancel();
    assert.equal(waiting.state, "cancelled");
    yield* socketClosed("/hang");
    console.log("cancelled waiting for headers: socket destroyed");
  }

  // 5. Cancelled half-way through the body: the socket is destroyed, not pooled half-read, and the
  //    next request gets a clean connection.
  {
    const reading = yield* spawn(function* readReport() {
      const res = yield* client.get("/half?again");
      return yield* res.text();
    });
    for (let i = 0; i < 500 && !snapshot(reading).waitingOn?.includes("reading body"); i++) yield* sleep(2);
    yield* reading.cancel();
    yield* socketClosed("/half?again");
    assert.deepEqual(yield* client.getJson("/orders/8"), { id: 7, lines: ["tea", "cups"] });
    assert.ok(!carriedBy.get("/orders/8")!.destroyed);
    console.log("cancelled reading the body: socket destroyed; the next request is fine");
  }
});

server.close();
await once(server, "close");
console.log("http-bodies: ok");

/**
 * The fault server (`createFaultServer` from `@keel/testing`): a real HTTP server on loopback that
 * misbehaves as each route's script says, on the harness's virtual clock, so an HTTP client's
 * retries and timeouts are tested against real sockets at exact instants, in milliseconds of real
 * time.
 */
import assert from "node:assert/strict";
import { now } from "@keel/core";
import { createHttpClient, HttpError, HttpTimeoutError } from "@keel/core/http";
import { createFaultServer, createHarness } from "@keel/testing";

// 1. A flaky service: 503 with Retry-After, then 200. The client retries it, waiting what the
//    server asked for; the server records each request at its instant on the virtual clock.
{
  const h = createHarness();
  const seen = await h.run(function* test() {
    const server = yield* createFaultServer(
      {
        "GET /stock": [
          { status: 503, retryAfter: 2 },
          { status: 200, json: { stock: 3 } },
        ],
      },
      { connectHang: false }, // this test never uses connectHangUrl: skip its child process
    );
    const client = yield* createHttpClient({ baseUrl: server.url });
    const body = yield* client.getJson<{ stock: number }>("/stock");
    return { body, hits: server.hits("/stock"), at: server.requests.map((r) => r.arrivedAt) };
  });
  assert.deepEqual(seen, { body: { stock: 3 }, hits: 2, at: [0, 2000] });
  await h.expectClean();
}

// 2. A server that accepts the request and never answers: the headers timeout fires at its exact
//    instant, and the client is told which phase timed out.
{
  const h = createHarness();
  const failure = await h.run(function* test() {
    const server = yield* createFaultServer({ "/hang": { hang: "before-headers" } }, { connectHang: false });
    const client = yield* createHttpClient({ baseUrl: server.url, retry: false });
    try {
      yield* client.get("/hang", { timeouts: { headersMs: 1500 } });
      return "answered";
    } catch (e) {
      assert.ok(e instanceof HttpTimeoutError);
      return `${e.phase} at ${yield* now()}`;
    }
  });
  assert.equal(failure, "headers at 1500");
  await h.expectClean();
}

// 3. A host that drops packets: connects to connectHangUrl never complete, so the connect timeout
//    fires. This is the one URL that needs the connect-hang listener (connectHang, on by default),
//    a child process that costs about 50 ms to start.
{
  const h = createHarness();
  const failure = await h.run(function* test() {
    const server = yield* createFaultServer({ "/": 200 });
    const client = yield* createHttpClient({ baseUrl: server.connectHangUrl, retry: false });
    try {
      yield* client.get("/", { timeouts: { connectMs: 800 } });
      return "connected";
    } catch (e) {
      assert.ok(e instanceof HttpTimeoutError);
      return `${e.phase} at ${yield* now()}`;
    }
  });
  assert.equal(failure, "connect at 800");
  await h.expectClean();
}

// 4. A reset mid-body and a refused port: the errors a client sees when a peer goes away.
{
  const h = createHarness();
  const codes = await h.run(function* test() {
    const server = yield* createFaultServer(
      { "/export": { reset: "mid-body", afterBytes: 100 }, "/gone": 404 },
      { connectHang: false },
    );
    const client = yield* createHttpClient({ baseUrl: server.url, retry: false });
    const found: string[] = [];
    for (const url of [`${server.url}/export`, `${server.refusedUrl}/`, `${server.url}/gone`]) {
      try {
        const res = yield* client.get(url);
        yield* res.text();
        found.push("ok");
      } catch (e) {
        found.push(e instanceof HttpError ? `HTTP ${e.status}` : String((e as { code?: string }).code));
      }
    }
    return found;
  });
  assert.deepEqual(codes.slice(1), ["ECONNREFUSED", "HTTP 404"]);
  assert.match(codes[0]!, /^(ECONNRESET|UND_ERR_SOCKET)$/);
  await h.expectClean();
}

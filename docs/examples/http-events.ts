/**
 * What the HTTP client reports: an event per phase of each attempt (`http:request`, `http:connect`,
 * `http:headers`, `http:body`, `http:timeout`), and a description of every wait in the task tree
 * (`GET /orders: waiting for headers`).
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { formatTaskTree, type KeelEvent, run, sleep, snapshot, spawn, type Task } from "@keel/core";
import { createHttpClient, HttpTimeoutError } from "@keel/core/http";

const server = createServer((req, res) => {
  req.on("error", () => {}); // the client destroys sockets on purpose here
  if (req.url === "/orders") return; // a slow backend: no headers yet
  if (req.url === "/report") {
    res.writeHead(200);
    res.write("part 1;"); // the rest never comes
    return;
  }
  res.end('{"ok":true}');
});
server.listen(0, "127.0.0.1");
await once(server, "listening");
const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

const events: KeelEvent[] = [];
let tree = "";
const root: Task<void> = run(
  function* service() {
    const client = yield* createHttpClient({ baseUrl, retry: false });

    // 1. One request, read to the end: request, connect, headers, body.
    yield* client.getJson("/health");

    // 2. A headers timeout: its own event, with the phase and the limit.
    try {
      yield* client.get("/orders", { timeouts: { headersMs: 20 } });
    } catch (e) {
      if (!(e instanceof HttpTimeoutError)) throw e;
    }

    // 3. The task tree while two requests wait: each wait says what it is.
    const orders = yield* spawn(function* listOrders() {
      yield* client.get("/orders");
    });
    const report = yield* spawn(function* downloadReport() {
      const res = yield* client.get("/report");
      yield* res.text();
    });
    // Poll the tree until both requests have got as far as they can (on a busy machine, a while).
    for (let i = 0; i < 200 && !/reading body \(7 bytes/.test(tree); i++) {
      yield* sleep(5);
      tree = formatTaskTree(snapshot(root));
    }
    yield* orders.cancel();
    yield* report.cancel();
  },
  { onEvent: (e) => events.push(e) },
);
await root;

const lines = events
  .filter((e) => e.type.startsWith("http:"))
  .map((e) => {
    const url = "url" in e ? e.url.replace(baseUrl, "") : "";
    const extra =
      e.type === "http:headers"
        ? ` ${e.status}`
        : e.type === "http:body"
          ? ` ${e.bytes} bytes`
          : e.type === "http:timeout"
            ? ` ${e.phase} ${e.timeoutMs} ms`
            : "";
    return `${e.type} ${"method" in e ? e.method : ""} ${url}${extra}`;
  });
assert.deepEqual(lines.slice(0, 6), [
  "http:request GET /health",
  "http:connect GET /health",
  "http:headers GET /health 200",
  "http:body GET /health 11 bytes",
  "http:request GET /orders",
  "http:connect GET /orders",
]);
assert.equal(lines[6], "http:timeout GET /orders headers 20 ms");
for (const line of lines.slice(0, 7)) console.log(line);

// Every event has the time, the task and its path; the phases carry elapsedMs since the request.
const headers = events.find((e) => e.type === "http:headers");
assert.ok(headers?.type === "http:headers" && headers.elapsedMs >= 0 && /^service#\d+$/.test(headers.path));

console.log(tree);
assert.match(tree, /listOrders#\d+ .*waiting on GET \/orders: waiting for headers/);
assert.match(tree, /downloadReport#\d+ .*waiting on GET \/report: reading body \(7 bytes so far\)/);

server.closeAllConnections();
server.close();
await once(server, "close");
console.log("http-events: ok");

/**
 * The client's retry loop: a per-attempt timeout that is retried, a budget the loop will not sleep
 * across, the caller's deadline over both (the outer claim wins), and `Retry-After` in seconds or as
 * an HTTP date.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import {
  constant,
  isRetryExhaustedError,
  isTimeoutError,
  type KeelEvent,
  type RetryInfo,
  run,
  timeout,
} from "@keel/core";
import { createHttpClient, isHttpError, parseRetryAfter } from "@keel/core/http";

const calls = new Map<string, number>();
const server = createServer((req, res) => {
  const n = (calls.get(req.url!) ?? 0) + 1;
  calls.set(req.url!, n);
  req.on("error", () => {}); // the client destroys sockets on purpose here
  if (req.url === "/slow-start" && n === 1) return; // the first call never gets an answer
  if (req.url === "/hang") return;
  if (req.url === "/busy-once" && n === 1) {
    res.writeHead(503, { "retry-after": "0" });
    res.end();
    return;
  }
  if (req.url === "/busy-long") {
    res.writeHead(503, { "retry-after": "120" });
    res.end();
    return;
  }
  if (req.url === "/busy-until") {
    res.writeHead(503, { "retry-after": new Date(Date.now() + 30_000).toUTCString() });
    res.end();
    return;
  }
  res.end("ok");
});
server.listen(0, "127.0.0.1");
await once(server, "listening");
const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

const events: KeelEvent[] = [];
const log: string[] = [];
await run(
  function* retries() {
    const client = yield* createHttpClient({ baseUrl });

    // 1. A per-attempt timeout is the attempt's own: it is retried. The first call hangs, the
    //    attempt gives up after 300 ms, and the second call answers. (This program runs on the real
    //    clock, so its limits leave room for a busy machine.)
    {
      const pauses: RetryInfo[] = [];
      const res = yield* client.get("/slow-start", {
        retry: { perAttemptMs: 300, backoff: constant(5), onRetry: (i) => pauses.push(i) },
      });
      assert.equal(yield* res.text(), "ok");
      assert.equal(calls.get("/slow-start"), 2);
      assert.equal(pauses.length, 1);
      assert.ok(pauses[0]!.timedOut && isTimeoutError(pauses[0]!.error));
      log.push("per-attempt 300 ms: attempt 1 timed out, attempt 2 answered");
    }

    // 2. A budget the next pause would cross: the loop gives up at once instead of sleeping into
    //    it. Attempt 1 ends at 200 ms; a 150 ms pause would end at 350, past the 300 ms budget.
    {
      let error: unknown = null;
      try {
        yield* client.get("/hang", { retry: { perAttemptMs: 200, budgetMs: 300, backoff: constant(150) } });
      } catch (e) {
        error = e;
      }
      assert.ok(isRetryExhaustedError(error));
      assert.equal(error.reason, "budget");
      assert.equal(error.attempts, 1);
      assert.ok(isTimeoutError(error.cause));
      log.push(`budget 300 ms: ${error.reason} after ${error.attempts} attempt, no pause taken`);
    }

    // 3. The caller's deadline is over the loop. A per-attempt limit of 5000 ms under a 300 ms
    //    deadline is clamped to it; the two fall due together and the outer claim wins: the caller
    //    gets its own TimeoutError, and the loop records no failure. (It also warns that no retry
    //    can fit: the retry:unreachable event.)
    {
      const attempts = () =>
        events.filter((e) => e.type === "http:request" && e.url.endsWith("/hang")).length;
      const before = attempts();
      let error: unknown = null;
      try {
        yield* timeout(300, () => client.get("/hang", { retry: { perAttemptMs: 5000 } }));
      } catch (e) {
        error = e;
      }
      assert.ok(isTimeoutError(error));
      assert.equal(error.label, "timeout(300)");
      assert.equal(attempts(), before + 1); // one attempt, not retried
      assert.ok(events.some((e) => e.type === "retry:unreachable"));
      log.push(`per-attempt 5000 ms under timeout(300): ${error.message}`);
    }

    // 4. Retry-After in seconds replaces the backoff pause: "0" means "now".
    {
      const pauses: RetryInfo[] = [];
      const res = yield* client.get("/busy-once", {
        retry: { backoff: constant(40), onRetry: (i) => pauses.push(i) },
      });
      assert.equal(res.status, 200);
      yield* res.text();
      assert.deepEqual(
        pauses.map((p) => [p.delayMs, p.delayReason]),
        [[0, "retry-after"]],
      );
      log.push("503 with Retry-After: 0, retried at once");
    }

    // 5. A Retry-After that does not fit the deadline: 120 s asked, 200 ms left. The loop gives up
    //    at once, with the server's answer as the cause, rather than sleep into the deadline.
    {
      let error: unknown = null;
      const started = performance.now();
      try {
        yield* timeout(200, () => client.get("/busy-long"));
      } catch (e) {
        error = e;
      }
      const tookMs = performance.now() - started;
      assert.ok(isRetryExhaustedError(error));
      assert.equal(error.reason, "deadline");
      assert.ok(isHttpError(error.cause));
      assert.equal(error.cause.retryAfterMs, 120_000);
      assert.equal(calls.get("/busy-long"), 1);
      assert.ok(tookMs < 200, `gave up after ${tookMs} ms`);
      log.push("503 with Retry-After: 120 under timeout(200): gave up at once (deadline)");
    }

    // 6. An HTTP date works too: retryAfterMs is the time until then (the date has 1 s resolution).
    {
      let error: unknown = null;
      try {
        yield* client.get("/busy-until", { retry: false });
      } catch (e) {
        error = e;
      }
      assert.ok(isHttpError(error));
      const ms = error.retryAfterMs!;
      assert.ok(ms > 28_000 && ms <= 30_000, `retryAfterMs ${ms}`);
      log.push(`503 with Retry-After: <a date 30 s ahead>: retryAfterMs ≈ ${Math.round(ms / 1000)} s`);
    }
  },
  { onEvent: (e) => events.push(e) },
);

// parseRetryAfter on its own, for wrapping another client.
assert.equal(parseRetryAfter("120", 0), 120_000);
assert.equal(parseRetryAfter("Thu, 01 Jan 1970 00:00:10 GMT", 4000), 6000);
assert.equal(parseRetryAfter("Thu, 01 Jan 1970 00:00:10 GMT", 60_000), 0); // in the past: now
assert.equal(parseRetryAfter("soon", 0), undefined); // unparseable: the backoff decides
assert.equal(parseRetryAfter(undefined, 0), undefined);

for (const line of log) console.log(line);
server.closeAllConnections();
server.close();
await once(server, "close");
console.log("http-retries: ok");

/**
 * Keel under `vi.useFakeTimers()` with vitest's defaults (every timer, `Date`, `performance` and
 * `hrtime` faked; not `nextTick` or `queueMicrotask`): the runtime, the virtual clock, the harness
 * and the HTTP client schedule on the host functions kept when they loaded, so fake timers installed
 * later neither capture them nor leave them waiting for fake time that nobody advances.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { realClock, run, scoped, sleep } from "@keel/core";
import { createHttpClient } from "@keel/core/http";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { createHarness } from "../src/harness.js";

let server: Server;
let baseUrl = "";

beforeAll(async () => {
  server = createServer((req, res) => res.end(`${req.method} ${req.url}`));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});
afterEach(() => {
  vi.useRealTimers();
});

describe("under vi.useFakeTimers() with vitest's defaults", () => {
  it("a harness test on the virtual clock makes a real HTTP call, sleeps, and ends clean", async () => {
    vi.useFakeTimers();
    const h = createHarness();
    const reply = await h.run(function* () {
      const text = yield* scoped(function* () {
        const client = yield* createHttpClient({ baseUrl, timeouts: { totalMs: 5000 } });
        yield* sleep(1000);
        const res = yield* client.get("/orders");
        const body = yield* res.text();
        // The request's holds on virtual time are released on the host's next turns: time moves on.
        yield* sleep(500);
        return `${res.status} ${body} @${h.clock.now()}`;
      });
      // So is the pool's, once the client's scope has closed it.
      yield* sleep(250);
      return `${text}, done @${h.clock.now()}`;
    });
    expect(reply).toBe("200 GET /orders @1500, done @1750");
    await h.expectClean();
  });

  it("a run on the real clock sleeps real milliseconds, and the faked clock does not move", async () => {
    vi.useFakeTimers();
    const fakeStart = Date.now();
    const started = realClock.now();
    const slept = await run(function* () {
      const t0 = realClock.now();
      yield* sleep(30);
      return realClock.now() - t0;
    });
    expect(slept).toBeGreaterThanOrEqual(30);
    expect(realClock.now() - started).toBeLessThan(5000);
    // The fake timers saw none of it: nothing was scheduled on them, and their time stood still.
    expect(vi.getTimerCount()).toBe(0);
    expect(Date.now()).toBe(fakeStart);
  });
});

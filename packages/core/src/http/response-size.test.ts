/**
 * `maxResponseBytes`: a body read whole stops at the limit with HttpResponseTooLargeError and its
 * socket is closed at once (seen from the server), not when the client's scope ends.
 */
import { createServer, type Server } from "node:http";
import type { Socket } from "node:net";
import { run, until } from "@keel/core";
import { createHttpClient, HttpResponseTooLargeError } from "@keel/core/http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSocketsAfter } from "../../test/support/http.js";

const MiB = 1024 * 1024;
let server: Server;
let base = "";
const open = new Set<Socket>();
let hits = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    hits++;
    const url = new URL(req.url ?? "/", "http://x");
    const mib = Number(url.searchParams.get("mib") ?? 10);
    if (url.pathname === "/announced") {
      // Announces a body one byte over 64 MiB, and sends none of it.
      res.writeHead(200, { "content-length": String(64 * MiB + 1) });
      res.flushHeaders();
      return;
    }
    if (url.pathname === "/json") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ blob: "x".repeat(mib * MiB) }));
      return;
    }
    // /chunked: `mib` chunks of 1 MiB without a content-length.
    res.writeHead(200, { "content-type": "application/octet-stream" });
    let sent = 0;
    const next = () => {
      while (sent < mib) {
        sent++;
        if (!res.write(Buffer.alloc(MiB, 120))) return void res.once("drain", next);
      }
      res.end();
    };
    res.on("error", () => {});
    next();
  });
  server.on("connection", (s: Socket) => {
    open.add(s);
    s.on("close", () => open.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});

afterAll(async () => {
  for (const s of open) s.destroy();
  await new Promise((r) => server.close(r));
});

function described(e: unknown) {
  if (!(e instanceof HttpResponseTooLargeError)) throw e;
  return { code: e.code, limitBytes: e.limitBytes, announced: e.announced, retryable: e.retryable };
}

describe("maxResponseBytes", () => {
  it("text() of a 10 MiB body under a 1 MiB limit fails once past it, and the server sees the socket close while the client lives", async () => {
    const out = await run(function* () {
      const client = yield* createHttpClient({ baseUrl: base, maxResponseBytes: MiB, retry: false });
      const res = yield* client.get("/chunked?mib=10");
      try {
        yield* res.text();
        return null;
      } catch (e) {
        // Still inside the client's scope: the socket must already be closing.
        const left = yield* waitForServer();
        return { ...described(e), left };
      }
    });
    expect(out).toEqual({
      code: "KEEL_HTTP_RESPONSE_TOO_LARGE",
      limitBytes: MiB,
      announced: false,
      retryable: false,
      left: 0,
    });
  });

  it("a request's own limit replaces the client's: Infinity reads the 4 MiB body whole", async () => {
    const size = await run(function* () {
      const client = yield* createHttpClient({ baseUrl: base, maxResponseBytes: 1024 });
      const res = yield* client.get("/chunked?mib=4", { maxResponseBytes: Infinity });
      return (yield* res.bytes()).byteLength;
    });
    expect(size).toBe(4 * MiB);
  });

  it("getJson over the limit fails without a retry (the same body would come again)", async () => {
    hits = 0;
    const out = await run(function* () {
      const client = yield* createHttpClient({ baseUrl: base, maxResponseBytes: MiB });
      try {
        yield* client.getJson("/json?mib=2");
        return null;
      } catch (e) {
        return described(e);
      }
    });
    expect(out).toMatchObject({ code: "KEEL_HTTP_RESPONSE_TOO_LARGE", limitBytes: MiB });
    expect(hits).toBe(1);
    expect(await openSocketsAfter(open, 2000)).toBe(0);
  });

  it("the default is 64 MiB: a content-length one byte over fails before any of the body is read", async () => {
    const out = await run(function* () {
      const client = yield* createHttpClient({ baseUrl: base, retry: false });
      const res = yield* client.get("/announced");
      try {
        yield* res.text();
        return null;
      } catch (e) {
        return { ...described(e), left: yield* waitForServer() };
      }
    });
    expect(out).toEqual({
      code: "KEEL_HTTP_RESPONSE_TOO_LARGE",
      limitBytes: 64 * MiB,
      announced: true,
      retryable: false,
      left: 0,
    });
  });

  it("chunks() is not limited: it holds one chunk at a time", async () => {
    const total = await run(function* () {
      const client = yield* createHttpClient({ baseUrl: base, maxResponseBytes: 1024 });
      const reader = (yield* client.get("/chunked?mib=3")).chunks();
      let bytes = 0;
      for (let r = yield* reader.next(); !r.done; r = yield* reader.next()) bytes += r.value.byteLength;
      return bytes;
    });
    expect(total).toBe(3 * MiB);
  });

  it("a limit that is not a whole number of bytes ≥ 0 is a RangeError naming it", async () => {
    await expect(run(() => createHttpClient({ maxResponseBytes: -1 }))).rejects.toThrow(/maxResponseBytes/);
    await expect(
      run(function* () {
        const client = yield* createHttpClient({ baseUrl: base });
        return yield* client.get("/chunked?mib=0", { maxResponseBytes: 1.5 });
      }),
    ).rejects.toThrow(RangeError);
  });
});

/** The server's open sockets after a bounded wait, from inside a Keel operation. */
function* waitForServer() {
  return yield* until(openSocketsAfter(open, 2000));
}

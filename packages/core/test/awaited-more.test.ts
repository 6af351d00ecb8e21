/**
 * Issue 24 item 6, the last of it: `provide(value)`, `fromEffection(op)` and an HTTP response's body
 * operations (`bytes()`, `chunks().next()`) refuse `await` too, naming themselves.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { call, resource, run, scoped } from "@keel/core";
import { fromEffection } from "@keel/core/effection";
import { createHttpClient } from "@keel/core/http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { awaitedError } from "./support/awaited.js";

const server = createServer((_req, res) => res.end("hello"));
let base = "";
beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe("await op: KEEL_OPERATION_AWAITED, the rest of the public operations", () => {
  it("provide(value) in a resource's body", async () => {
    let made: object | null = null;
    await run(() =>
      scoped(function* () {
        yield* resource<number>(function* (provide) {
          made = provide(2);
          yield* provide(1);
        });
      }),
    );
    const e = await awaitedError(made!);
    expect([e.code, e.message.startsWith("provide(value)")]).toEqual(["KEEL_OPERATION_AWAITED", true]);
  });

  it("fromEffection(op)", async () => {
    const e = await awaitedError(
      fromEffection(function* greet() {
        return 1;
      }),
    );
    expect([e.code, e.message.startsWith("fromEffection(greet)")]).toEqual(["KEEL_OPERATION_AWAITED", true]);
  });

  it("an HTTP response's bytes() and chunks().next()", async () => {
    const labels = await run(function* () {
      const http = yield* createHttpClient({ baseUrl: base });
      const res = yield* http.get("/");
      const out: string[] = [];
      for (const op of [res.bytes(), res.chunks().next()]) {
        const e = yield* call(() => awaitedError(op));
        out.push(`${e.code} ${e.message.split(" ")[0]}`);
      }
      yield* res.text();
      return out;
    });
    expect(labels).toEqual([
      "KEEL_OPERATION_AWAITED response.bytes()",
      "KEEL_OPERATION_AWAITED response.chunks().next()",
    ]);
  });
});

/**
 * A BullMQ without `ioredis` (an optional peer of BullMQ 6) is named as a missing package, with the
 * command that installs it, not reported as a Redis that does not answer: through the engine's wait
 * for a connection, given the error BullMQ 6 raises when it cannot load `ioredis` (its own words);
 * and for real, in a child process where `ioredis` cannot be found and `bullmq` can
 * (fixtures/unresolvable.mjs). BullMQ 6 loads `ioredis` lazily, with `require`, when a connection is
 * made from options, so `@keel/worker/bullmq` imports and the error comes from `useBullQueue`.
 * (BullMQ 5 depends on `ioredis`: there it cannot be missing.)
 */
import { run } from "@keel/core";
import { MissingPackageError } from "@keel/worker/bullmq";
import { describe, expect, it } from "vitest";
import { CHILD_TEST_TIMEOUT_MS, startChildWith } from "../../core/test/support/child.js";
import { missingIoredis, whenReady } from "../src/bullmq/connect.js";

/** BullMQ 6.7's error (redis-connection.js, `loadIORedis`), raised by its connection's init. */
const bullmqError = new Error(
  "BullMQ could not load the optional 'ioredis' package. Install it with `npm install ioredis`, or provide a different Redis client instance (e.g. node-redis) via the connection option.",
);

describe("a missing ioredis", () => {
  it("is a MissingPackageError naming ioredis and its install command, at once", async () => {
    const connecting = {
      waitUntilReady: () => Promise.reject(bullmqError),
      on: () => undefined,
    };
    const started = performance.now();
    const error = await run(() =>
      whenReady(connecting, "useBullQueue(mail)", "127.0.0.1:6379", 5_000, () => undefined),
    ).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(MissingPackageError);
    expect(error).toMatchObject({
      code: "KEEL_MISSING_PACKAGE",
      packageName: "ioredis",
      fatal: true,
      cause: bullmqError,
    });
    expect((error as Error).message).toBe(
      "useBullQueue(mail): the package ioredis is not installed; BullMQ needs it to connect to Redis: npm install ioredis",
    );
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it("is told from other errors: Node's module-not-found for ioredis only", () => {
    expect(
      missingIoredis(Object.assign(new Error("Cannot find module 'ioredis'"), { code: "MODULE_NOT_FOUND" })),
    ).toBe(true);
    expect(
      missingIoredis(
        Object.assign(new Error("Cannot find package 'ioredis' imported from x"), {
          code: "ERR_MODULE_NOT_FOUND",
        }),
      ),
    ).toBe(true);
    expect(
      missingIoredis(Object.assign(new Error("Cannot find module 'pg'"), { code: "MODULE_NOT_FOUND" })),
    ).toBe(false);
    expect(missingIoredis(new Error("connect ECONNREFUSED 127.0.0.1:6379"))).toBe(false);
  });

  // BullMQ 5 depends on ioredis itself (it is installed with it, and required when bullmq loads):
  // a BullMQ 5 without ioredis is not an install npm makes. The case is BullMQ 6's, where it is a peer.
  const onBullmq5 = (process.env.KEEL_EXPECT_BULLMQ ?? "6").startsWith("5.");
  it.skipIf(onBullmq5)(
    "for real: useBullQueue in a process without ioredis fails with MissingPackageError, and the process exits",
    async () => {
      const child = startChildWith(
        {
          imports: [new URL("./fixtures/unresolvable.mjs", import.meta.url)],
          env: { KEEL_UNRESOLVABLE: "ioredis" },
        },
        new URL("./fixtures/no-ioredis.ts", import.meta.url),
        "6379",
      );
      const exit = await child.exited;
      expect({ stdout: child.stdoutLines(), stderr: child.stderr() }).toEqual({
        stdout: [
          "caught KEEL_MISSING_PACKAGE ioredis MissingPackageError",
          "useBullQueue(mail): the package ioredis is not installed; BullMQ needs it to connect to Redis: npm install ioredis",
        ],
        stderr: "",
      });
      expect(exit.code).toBe(0);
    },
    CHILD_TEST_TIMEOUT_MS,
  );
});

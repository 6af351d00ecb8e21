/**
 * Which undici the HTTP suite runs against: 7 under `npm test`, 8 under scripts/http-undici8.sh
 * (KEEL_EXPECT_UNDICI=8). Told apart by behaviour: undici 8 refuses a handler of the API it removed
 * (onConnect/onHeaders…), the one Keel's client used to give it.
 */
import { Agent } from "undici";
import { expect, test } from "vitest";

const expected = process.env.KEEL_EXPECT_UNDICI ?? "7";

test(`the suite runs against undici ${expected}: a legacy handler is ${expected === "8" ? "refused" : "accepted"}`, async () => {
  const agent = new Agent();
  let error: unknown = null;
  try {
    const legacy = {
      onConnect() {},
      onHeaders: () => true,
      onData: () => true,
      onComplete() {},
      onError(e: Error) {
        error = e;
      },
    };
    agent.dispatch({ origin: "http://127.0.0.1:9", path: "/", method: "GET" }, legacy as never);
  } catch (e) {
    error = e;
  } finally {
    await agent.destroy();
  }
  const refused = (error as { code?: string } | null)?.code === "UND_ERR_INVALID_ARG";
  expect(refused).toBe(expected === "8");
});

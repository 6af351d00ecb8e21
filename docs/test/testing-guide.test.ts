/**
 * The vitest test printed in docs/guide/testing.md ("A test, start to end"), run as written.
 */
import { isTimeoutError, sleep, timeout } from "@keel/core";
import { createHarness } from "@keel/testing";
import { expect, it } from "vitest";

it("an inner timeout that fires leaves the outer armed", async () => {
  const h = createHarness();
  const task = h.run(() =>
    timeout(1000, function* body() {
      try {
        yield* timeout(100, sleep(5000));
      } catch (e) {
        h.mark(isTimeoutError(e) ? "inner timed out" : "other");
      }
      yield* sleep(200);
      return "ok";
    }),
  );
  await expect(task).resolves.toBe("ok");
  expect(h.log).toEqual(["inner timed out@100"]);
  expect(h.clock.now()).toBe(300);
  await h.expectClean();
});

/**
 * Pins what `npm run demo:workflow` narrates: a process killed inside `charge` on the embedded
 * SQLite store, a second one resuming it, and only the step in flight run again.
 */
import { describe, expect, it } from "vitest";
import { CHILD_TEST_TIMEOUT_MS, startChild } from "../../packages/core/test/support/child.js";

describe("npm run demo:workflow", () => {
  it(
    "a checkout survives kill -9: reserve replayed, charge run again, the same result",
    async () => {
      const demo = startChild(new URL("../src/workflow-demo.ts", import.meta.url));
      const exit = await demo.exited;
      const out = demo.stdoutLines();
      expect(exit.code, demo.stderr()).toBe(0);
      expect(out.some((l) => /^2\. kill -9 \d+, in the middle of charge/.test(l))).toBe(true);
      expect(out.some((l) => /\] reserve +replayed/.test(l))).toBe(true);
      expect(
        out.some((l) =>
          /result: \{"reservation":"rsv_A-1001","charge":"ch_4200","parcel":"parcel_A-1001"\}/.test(l),
        ),
      ).toBe(true);
      expect(out.slice(-4).map((l) => l.trim())).toEqual([
        "reserve  once",
        "charge   2 times (it was in flight at the kill; its idempotency key let the API see the repeat)",
        "ship     once",
        "receipt  once",
      ]);
    },
    CHILD_TEST_TIMEOUT_MS,
  );
});

import { all, sleep } from "@keel/core";
import { createHarness } from "@keel/testing";
import { describe, expect, it } from "vitest";

describe("kernel regressions found by the property tests", () => {
  it("a cleanup budget that runs out while the task waits for its children cuts its own cleanup after", async () => {
    const h = createHarness();
    const t = h.run(
      function* root() {
        try {
          yield* all([
            function* child() {
              try {
                yield* sleep(0);
              } finally {
                h.mark("child.fin");
                yield* sleep(150);
                h.mark("child.done");
              }
            },
          ]);
        } finally {
          h.mark("root.fin");
          yield* sleep(150);
          h.mark("root.done");
        }
      },
      { cleanupBudgetMs: 100 },
    );
    h.clock.schedule(0, () => {
      t.cancel();
    });
    await expect(t).rejects.toMatchObject({ name: "TaskCancelledError" });
    // The whole subtree is bounded by one budget: the root's own finally is cut at once at 100.
    expect(h.log).toEqual(["child.fin@0", "root.fin@100"]);
    expect(h.eventsOf("cleanup:overrun").map((e) => [e.path, e.at])).toEqual([
      [`root#${t.id}/child#${t.id + 1}`, 100],
      [`root#${t.id}`, 100],
    ]);
    await h.expectClean();
  });
});

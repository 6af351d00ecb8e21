/**
 * `allSettled`: every outcome, in input order, and never a cancellation; `mapLimitSettled` is the
 * same for a bounded fan-out.
 */
import assert from "node:assert/strict";
import { allSettled, isCancelled, mapLimitSettled, sleep, TaskCancelledError } from "@keel/core";
import { createHarness } from "@keel/testing";

function* sync(name: string, ms: number, fails = false) {
  yield* sleep(ms);
  if (fails) throw new Error(`${name}: upstream 503`);
  return `${name} synced`;
}

// 1. Three syncs; one fails. The others are not cancelled, and each outcome is reported.
{
  const h = createHarness();
  const results = await h.run(() =>
    allSettled([() => sync("orders", 30), () => sync("stock", 10, true), () => sync("prices", 20)]),
  );
  const report = results.map((r) =>
    r.status === "fulfilled" ? r.value : `failed: ${(r.reason as Error).message}`,
  );
  console.log(report.join("; "), `(at ${h.clock.now()})`);
  assert.deepEqual(report, ["orders synced", "failed: stock: upstream 503", "prices synced"]);
  assert.equal(h.clock.now(), 30);
  await h.expectClean();
}

// 2. Cancelling the caller is not an outcome to collect: the children are cancelled and awaited, and
//    the caller's own catch sees Cancelled (then rethrows it, as every catch must).
{
  const h = createHarness();
  const task = h.run(function* nightly() {
    try {
      return yield* allSettled([() => sync("orders", 100), () => sync("stock", 10, true)]);
    } catch (e) {
      h.mark(isCancelled(e) ? "cancelled, nothing collected" : "unexpected");
      throw e;
    }
  });
  h.clock.schedule(50, () => void task.cancel("shutting down"));
  await assert.rejects(Promise.resolve(task), TaskCancelledError);
  console.log(h.log.join(", "));
  assert.deepEqual(h.log, ["cancelled, nothing collected@50"]);
  await h.expectClean();
}

// 3. mapLimitSettled: at most two at a time, a failure stops nothing, results in input order.
{
  const h = createHarness();
  const results = await h.run(() =>
    mapLimitSettled(["a", "b", "c", "d"], 2, function* push(sku, i) {
      return yield* sync(sku, 10, i === 1);
    }),
  );
  console.log(results.map((r) => r.status).join(", "), `(at ${h.clock.now()})`);
  assert.deepEqual(
    results.map((r) => r.status),
    ["fulfilled", "rejected", "fulfilled", "fulfilled"],
  );
  assert.equal(h.clock.now(), 20);
  await h.expectClean();
}
console.log("groups-all-settled: ok");

/**
 * The README example: a request handler with a timeout, a child task, a deadline passed on with
 * `remaining()`, and a shielded audit write in `finally`. Runs on the real clock in ~0.2 s.
 * The README shows this file from the import of `@keel/core` on, without `fetchQuote`.
 */
import { isTimeoutError, remaining, run, shield, sleep, spawn, timeout } from "@keel/core";

function* fetchQuote(sku: string, budgetMs: number) {
  console.log(`  fetching ${sku} with a budget of ${Math.round(budgetMs)} ms`);
  yield* sleep(sku === "slow" ? 500 : 20); // stands in for an HTTP call given that budget
  return { sku, price: 42 };
}

function* handle(sku: string) {
  return yield* timeout(100, function* handler() {
    yield* spawn(function* keepAlive() {
      for (;;) yield* sleep(30); // a child: cancelled and awaited when the handler ends
    });
    try {
      return yield* fetchQuote(sku, yield* remaining()); // pass on what is left of the 100 ms
    } finally {
      // runs on success, error and timeout; the shield lets this step finish, within 50 ms
      yield* shield(
        function* audit() {
          yield* sleep(5);
          console.log(`  audit written for ${sku}`);
        },
        { limitMs: 50 },
      );
    }
  });
}

console.log(await run(() => handle("fast"))); // { sku: 'fast', price: 42 }
try {
  await run(() => handle("slow"));
} catch (e) {
  console.log(isTimeoutError(e) ? e.message : e); // timeout(100): timed out after 100 ms
}

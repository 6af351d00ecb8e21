/** The size row's program for Keel: a first attempt that hangs, cut by its timeout and retried. */
import { constant, retry, run, sleep, timeout } from "@keel/core";

let calls = 0;
const greeting = await run(() =>
  retry(
    () =>
      timeout(20, function* attempt() {
        if (++calls < 2) yield* sleep(1000);
        return "hello, world";
      }),
    { attempts: 3, backoff: constant(10) },
  ),
);
console.log(greeting);

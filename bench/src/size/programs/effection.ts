/**
 * The size row's program for effection 4, which has no timeout or retry of its own: the timeout is
 * a `race` with a `sleep` that throws, the retry a loop, as its docs show them.
 */
import { type Operation, race, run, sleep } from "effection";

function timeout<T>(ms: number, op: () => Operation<T>): Operation<T> {
  return race([
    op(),
    (function* timer(): Operation<never> {
      yield* sleep(ms);
      throw new Error(`timed out after ${ms} ms`);
    })(),
  ]);
}

function* retry<T>(op: () => Operation<T>, attempts: number, delayMs: number): Operation<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return yield* op();
    } catch (error) {
      if (attempt >= attempts) throw error;
      yield* sleep(delayMs);
    }
  }
}

let calls = 0;
const greeting = await run(() =>
  retry(
    () =>
      timeout(20, function* attempt() {
        if (++calls < 2) yield* sleep(1000);
        return "hello, world";
      }),
    3,
    10,
  ),
);
console.log(greeting);

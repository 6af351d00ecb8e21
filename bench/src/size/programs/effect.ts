/** The size row's program for effect 4: `Effect.timeout` and `Effect.retry` with a schedule. */
import { Effect, Schedule } from "effect";

let calls = 0;
const attempt = Effect.gen(function* attempt() {
  if (++calls < 2) yield* Effect.sleep("1 second");
  return "hello, world";
});
const greeting = await Effect.runPromise(
  attempt.pipe(
    Effect.timeout("20 millis"),
    Effect.retry({ times: 2, schedule: Schedule.spaced("10 millis") }),
  ),
);
console.log(greeting);

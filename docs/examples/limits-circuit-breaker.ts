/**
 * A circuit breaker stops calling a dependency that keeps failing. `closed`: calls pass and failures
 * are counted; `open`: calls fail at once with BrokenCircuitError, without touching the dependency;
 * `half-open` (after `halfOpenAfterMs`): one probe call decides. A cancellation is never a failure.
 */
import assert from "node:assert/strict";
import {
  all,
  createCircuitBreaker,
  isBrokenCircuitError,
  type KeelEvent,
  type Op,
  race,
  run,
  sleep,
  suspend,
  timeout,
} from "@keel/core";
import { createVirtualClock } from "@keel/testing";

function* failing(): Generator<never, never> {
  throw new Error("connection refused");
}
function* healthy() {
  return "ok";
}

/** Runs one call on `clock` and names its outcome. */
async function outcome(
  op: Op<unknown>,
  clock: ReturnType<typeof createVirtualClock>,
  onEvent: (e: KeelEvent) => void = () => {},
): Promise<string> {
  try {
    return String(await run(op, { clock, onEvent }));
  } catch (e) {
    return (e as Error).name;
  }
}

// 1. The states. Three failures open the breaker at 0; calls then fail at once without running; at
//    1000 it reads half-open; the probe succeeds and closes it. A call that changes the state emits
//    `breaker:state`; open → half-open is the clock's doing, not a call's, so it is no event.
{
  const clock = createVirtualClock();
  const transitions: string[] = [];
  const onEvent = (e: KeelEvent) => {
    if (e.type === "breaker:state") transitions.push(`${e.name}: ${e.from} → ${e.to}`);
  };
  const breaker = createCircuitBreaker({ failureThreshold: 3, halfOpenAfterMs: 1000, name: "payments" });
  const states: string[] = [];
  for (let i = 0; i < 3; i++) await outcome(() => breaker.run(failing), clock, onEvent);
  states.push(`after 3 failures: ${breaker.state}`);
  let ran = false;
  const refused = run(
    () =>
      breaker.run(function* charge() {
        ran = true;
      }),
    { clock },
  );
  await assert.rejects(Promise.resolve(refused), (e) => {
    assert.ok(isBrokenCircuitError(e));
    states.push(`a call while open: ${e.message}`);
    return true;
  });
  assert.equal(ran, false);
  clock.advance(1000);
  states.push(`at ${clock.now()}: ${breaker.state}`);
  states.push(`probe: ${await outcome(() => breaker.run(healthy), clock, onEvent)}, now ${breaker.state}`);
  console.log(states.join("\n"));
  console.log(`breaker:state events: ${transitions.join(", ")}`);
  assert.deepEqual(transitions, ["payments: closed → open", "payments: half-open → closed"]);
  assert.deepEqual(states, [
    "after 3 failures: open",
    "a call while open: circuit payments is open: call not attempted",
    "at 1000: half-open",
    "probe: ok, now closed",
  ]);
}

// 2. Half-open lets exactly one probe through: a second call while the probe is in flight is refused.
//    A failed probe opens the breaker for another `halfOpenAfterMs`.
{
  const clock = createVirtualClock();
  const breaker = createCircuitBreaker({ failureThreshold: 1, halfOpenAfterMs: 1000 });
  await outcome(() => breaker.run(failing), clock);
  clock.advance(1000);
  const log: string[] = [];
  await run(
    () =>
      all([
        function* probe() {
          try {
            yield* breaker.run(function* slowlyFailing() {
              yield* sleep(100);
              throw new Error("still down");
            });
          } catch (e) {
            log.push(`probe failed@${clock.now()}: ${(e as Error).message}, now ${breaker.state}`);
          }
        },
        function* second() {
          yield* sleep(50);
          try {
            yield* breaker.run(healthy);
          } catch (e) {
            log.push(`second call@${clock.now()}: ${(e as Error).message}`);
          }
        },
      ]),
    { clock },
  );
  clock.advance(999);
  log.push(`at ${clock.now()}: ${breaker.state}`);
  clock.advance(1);
  log.push(`at ${clock.now()}: ${breaker.state}`);
  console.log(log.join("\n"));
  assert.deepEqual(log, [
    "second call@1050: circuit breaker is half-open: call not attempted",
    "probe failed@1100: still down, now open",
    "at 2099: open",
    "at 2100: half-open",
  ]);
}

// 3. A cancellation is never a failure. Four failures on a threshold of 5, then two calls stopped by
//    their callers (a caller's deadline, a lost race): the breaker stays closed. A timeout *inside*
//    the call is different: there the dependency was too slow, and that is a failure.
{
  const clock = createVirtualClock();
  const breaker = createCircuitBreaker({ failureThreshold: 5, halfOpenAfterMs: 1000 });
  for (let i = 0; i < 4; i++) await outcome(() => breaker.run(failing), clock);
  const callerDeadline = await outcome(() => timeout(10, () => breaker.run(suspend)), clock);
  const lostRace = await outcome(() => race([breaker.run(suspend), sleep(5)]), clock);
  console.log(
    `caller's timeout: ${callerDeadline}; race won by the sleep (${lostRace}); breaker ${breaker.state}`,
  );
  assert.equal(callerDeadline, "TimeoutError");
  assert.equal(breaker.state, "closed");
  const ownTimeout = await outcome(() => breaker.run(() => timeout(10, suspend)), clock);
  console.log(`a timeout inside the call: ${ownTimeout}, the fifth failure; breaker ${breaker.state}`);
  assert.equal(breaker.state, "open");
}

// 4. `isFailure` decides what counts: a 404 says the dependency is up, so it does not count.
//    With `windowMs`, only failures within the window count (and a success still resets the count).
{
  const clock = createVirtualClock();
  const breaker = createCircuitBreaker({
    failureThreshold: 2,
    halfOpenAfterMs: 1000,
    isFailure: (e) => (e as { status?: number }).status !== 404,
  });
  const notFound = function* lookup() {
    throw Object.assign(new Error("no such user"), { status: 404 });
  };
  for (let i = 0; i < 5; i++) await outcome(() => breaker.run(notFound), clock);
  assert.equal(breaker.state, "closed");

  const windowed = createCircuitBreaker({ failureThreshold: 3, windowMs: 1000, halfOpenAfterMs: 1000 });
  const states: string[] = [];
  const clock2 = createVirtualClock();
  await run(
    function* spreadFailures() {
      for (const at of [0, 600, 1200, 1500]) {
        yield* sleep(at - clock2.now());
        try {
          yield* windowed.run(failing);
        } catch {}
        states.push(`failure@${at}: ${windowed.state}`);
      }
    },
    { clock: clock2 },
  );
  console.log(`404s: closed; windowed: ${states.join(", ")}`);
  assert.deepEqual(states, [
    "failure@0: closed",
    "failure@600: closed",
    "failure@1200: closed",
    "failure@1500: open",
  ]);
}
console.log("limits-circuit-breaker: ok");

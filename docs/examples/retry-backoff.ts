/**
 * Backoff policies are pure steppers: `next(state, random)` returns a delay and the next state, with
 * no clock inside, so a policy is understood by listing its delays. Jitter spreads the retries of many
 * clients apart; full jitter spreads them the most, which is why `retry` uses it by default.
 */
import assert from "node:assert/strict";
import { type Backoff, type BackoffState, constant, exponential, fromDelays, retry, run } from "@keel/core";
import { createVirtualClock } from "@keel/testing";

function delays(backoff: Backoff, random: () => number, count = 6): number[] {
  const out: number[] = [];
  let state: BackoffState;
  for (let i = 0; i < count; i++) {
    const step = backoff.next(state, random);
    out.push(Math.round(step.delayMs * 10) / 10);
    state = step.state;
  }
  return out;
}

// 1. Capped exponential, t = min(maxMs, baseMs · factor^(n-1)) = 100, 200, 400, 800, 1000, 1000,
//    with each jitter at a random draw of 0.5.
{
  const at = (jitter: "none" | "full" | "equal" | "decorrelated") =>
    delays(exponential({ baseMs: 100, factor: 2, maxMs: 1000, jitter }), () => 0.5);
  const table = { none: at("none"), full: at("full"), equal: at("equal"), decorrelated: at("decorrelated") };
  for (const [name, list] of Object.entries(table)) console.log(`${name.padEnd(12)} ${list.join(", ")}`);
  assert.deepEqual(table.none, [100, 200, 400, 800, 1000, 1000]); // t
  assert.deepEqual(table.full, [50, 100, 200, 400, 500, 500]); // random · t
  assert.deepEqual(table.equal, [75, 150, 300, 600, 750, 750]); // t/2 + random · t/2
  // Decorrelated: baseMs + random · (3 · previous − baseMs), capped: it grows from the last delay.
  assert.deepEqual(table.decorrelated, [200, 350, 575, 912.5, 1000, 1000]);
  // The bounds each jitter keeps: full can go down to 0, equal to t/2, decorrelated to baseMs.
  assert.deepEqual(
    delays(exponential({ baseMs: 100, maxMs: 1000, jitter: "full" }), () => 0),
    [0, 0, 0, 0, 0, 0],
  );
  assert.deepEqual(
    delays(exponential({ baseMs: 100, maxMs: 1000, jitter: "equal" }), () => 0),
    [50, 100, 200, 400, 500, 500],
  );
}

// 2. The other two steppers.
{
  const steady = delays(constant(250), Math.random, 3);
  const listed = delays(fromDelays([10, 20, 40]), Math.random, 5);
  console.log(`constant(250): ${steady.join(", ")}; fromDelays([10, 20, 40]): ${listed.join(", ")}`);
  assert.deepEqual(steady, [250, 250, 250]);
  assert.deepEqual(listed, [10, 20, 40, 40, 40]); // then the last one again
}

// 3. Why jitter: 1000 clients that failed at the same instant (a deploy, a blip) retry on the same
//    schedule. Without jitter they all come back at exactly 100 ms: the dependency gets the whole
//    herd at once, again and again. With full jitter the first retries spread over [0, 100), and no
//    10 ms window gets more than a small share.
{
  let seed = 42; // a small deterministic generator, so the numbers printed are the same every run
  const prng = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const busiestWindow = (jitter: "none" | "full" | "equal") => {
    const b = exponential({ baseMs: 100, maxMs: 1000, jitter });
    const windows = new Map<number, number>();
    for (let client = 0; client < 1000; client++) {
      const w = Math.floor(b.next(undefined, prng).delayMs / 10);
      windows.set(w, (windows.get(w) ?? 0) + 1);
    }
    return Math.max(...windows.values());
  };
  const none = busiestWindow("none");
  const equal = busiestWindow("equal");
  const full = busiestWindow("full");
  console.log(`1000 clients, first retry, busiest 10 ms window: none ${none}, equal ${equal}, full ${full}`);
  assert.equal(none, 1000);
  assert.ok(full < equal && equal < none);
}

// 4. In `retry`, the jitter's randomness comes from the runtime's random source, never from
//    Math.random directly: pin it with `run(op, { random })` (or `withRandom`) and the schedule is exact.
{
  const clock = createVirtualClock();
  const starts: number[] = [];
  await run(
    () =>
      retry(
        function* flaky() {
          starts.push(clock.now());
          if (starts.length < 4) throw Object.assign(new Error("unavailable"), { status: 503 });
        },
        { backoff: exponential({ baseMs: 100, maxMs: 1000 }) },
      ),
    { clock, random: () => 0.75 },
  );
  console.log(`retry with random pinned to 0.75: attempts at ${starts.join(", ")}`);
  assert.deepEqual(starts, [0, 75, 225, 525]);
}
console.log("retry-backoff: ok");

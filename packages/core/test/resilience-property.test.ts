/**
 * Property test of the load-control primitives under cancellation storms: many tasks acquire and use
 * semaphore permits, send to and receive from a channel, and take rate-limiter tokens, with random
 * sleeps, random timeouts around their waits and random cancellations at random times, all on the
 * virtual clock. Afterwards the books must balance: every permit back, no waiter left anywhere, no
 * timer pending, no task live; and at no moment more than `permits` holders at once.
 */
import {
  ChannelClosedError,
  createChannel,
  createRateLimiter,
  createSemaphore,
  type Operation,
  scoped,
  sleep,
  spawn,
  type Task,
  TaskCancelledError,
  TimeoutError,
  timeout,
} from "@keel/core";
import { createHarness } from "@keel/testing";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

type Kind = "use" | "acquire" | "send" | "receive" | "take";

interface Script {
  readonly kind: Kind;
  readonly startMs: number;
  /** How many times the task repeats its step. */
  readonly repeat: number;
  /** How long a holder holds (and a receiver works) per step. */
  readonly holdMs: number;
  /** How long a holder's `finally` takes before it lets go. */
  readonly cleanupMs: number;
  /** A sleep between steps. */
  readonly gapMs: number;
  /** A timeout around each step's wait, or none. */
  readonly waitTimeoutMs: number | null;
  /** When a canceller cancels this task, or never. */
  readonly cancelAtMs: number | null;
  /** For `acquire`: give the permit back early with `permit.release()`. */
  readonly releaseEarly: boolean;
}

interface Scenario {
  readonly permits: number;
  readonly capacity: number;
  readonly perSecond: number;
  readonly burst: number;
  readonly closeAtMs: number;
  readonly scripts: readonly Script[];
}

const script: fc.Arbitrary<Script> = fc.record({
  kind: fc.constantFrom<Kind>("use", "acquire", "send", "receive", "take"),
  startMs: fc.integer({ min: 0, max: 100 }),
  repeat: fc.integer({ min: 1, max: 3 }),
  holdMs: fc.integer({ min: 0, max: 50 }),
  cleanupMs: fc.integer({ min: 0, max: 20 }),
  gapMs: fc.integer({ min: 0, max: 30 }),
  waitTimeoutMs: fc.option(fc.integer({ min: 0, max: 80 }), { nil: null, freq: 2 }),
  cancelAtMs: fc.option(fc.integer({ min: 0, max: 300 }), { nil: null, freq: 2 }),
  releaseEarly: fc.boolean(),
});

const scenario: fc.Arbitrary<Scenario> = fc.record({
  permits: fc.integer({ min: 1, max: 3 }),
  capacity: fc.integer({ min: 1, max: 3 }),
  perSecond: fc.constantFrom(5, 10, 20, 50),
  burst: fc.integer({ min: 1, max: 3 }),
  closeAtMs: fc.integer({ min: 0, max: 400 }),
  scripts: fc.array(script, { minLength: 1, maxLength: 12 }),
});

/** Runs one storm and checks every property; throws (through `expect`) on the first broken one. */
async function storm(s: Scenario): Promise<void> {
  const h = createHarness();
  const sem = createSemaphore(s.permits, { name: "db" });
  const ch = createChannel<string>({ capacity: s.capacity });
  const limiter = createRateLimiter({ perSecond: s.perSecond, burst: s.burst });

  const violations: string[] = [];
  let holders = 0;
  let maxHolders = 0;
  const checkBooks = (where: string) => {
    if (sem.available < 0 || sem.available > s.permits)
      violations.push(`${where}@${h.clock.now()}: available ${sem.available} of ${s.permits}`);
    if (sem.waiting > 0 && sem.available > 0)
      violations.push(`${where}@${h.clock.now()}: ${sem.available} free while ${sem.waiting} wait`);
    if (ch.size > s.capacity)
      violations.push(`${where}@${h.clock.now()}: channel size ${ch.size} > ${s.capacity}`);
  };
  const enter = () => {
    holders++;
    maxHolders = Math.max(maxHolders, holders);
    if (holders > s.permits) violations.push(`${holders} holders of ${s.permits} at ${h.clock.now()}`);
    checkBooks("enter");
  };
  const leave = () => {
    holders--;
    checkBooks("leave");
  };

  const attempted = new Set<string>();
  const sent = new Set<string>();
  const received: string[] = [];
  const takes: number[] = [];

  const bounded = <T>(ms: number | null, op: () => Operation<T>): Operation<T> =>
    ms === null ? scoped(op) : timeout(ms, op);

  function* holdPermit(sc: Script): Operation<void> {
    const permit = yield* sem.acquire();
    enter();
    let held = true;
    try {
      yield* sleep(sc.holdMs);
      if (sc.releaseEarly) {
        held = false;
        leave();
        permit.release();
        checkBooks("early release");
        yield* sleep(sc.holdMs);
      }
    } finally {
      if (held) {
        try {
          yield* sleep(sc.cleanupMs);
        } finally {
          leave();
        }
      }
    }
  }

  function* step(sc: Script, id: string): Operation<"again" | "stop"> {
    switch (sc.kind) {
      case "use":
        yield* bounded(sc.waitTimeoutMs, () =>
          sem.use(function* hold() {
            enter();
            try {
              yield* sleep(sc.holdMs);
            } finally {
              try {
                yield* sleep(sc.cleanupMs);
              } finally {
                leave();
              }
            }
          }),
        );
        return "again";
      case "acquire":
        yield* bounded(sc.waitTimeoutMs, () => holdPermit(sc));
        return "again";
      case "send":
        attempted.add(id);
        yield* bounded(sc.waitTimeoutMs, () => ch.send(id));
        sent.add(id);
        checkBooks("sent");
        return "again";
      case "receive": {
        const r = yield* bounded(sc.waitTimeoutMs, () => ch.next());
        if (r.done) return "stop";
        received.push(r.value);
        checkBooks("received");
        yield* sleep(sc.holdMs);
        return "again";
      }
      case "take":
        yield* bounded(sc.waitTimeoutMs, function* takeOne() {
          yield* limiter.take();
          takes.push(h.clock.now());
        });
        return "again";
    }
  }

  const worker = (sc: Script, index: number) =>
    function* workerTask(): Operation<void> {
      yield* sleep(sc.startMs);
      for (let r = 0; r < sc.repeat; r++) {
        try {
          if ((yield* step(sc, `${index}.${r}`)) === "stop") return;
        } catch (e) {
          // The expected failures of a step; anything else (Cancelled included) ends the task.
          if (!(e instanceof TimeoutError || e instanceof ChannelClosedError)) throw e;
        }
        yield* sleep(sc.gapMs);
      }
    };

  const drained: string[] = [];
  const root = h.run(function* stormRoot() {
    const workers: Task<void>[] = [];
    for (const [i, sc] of s.scripts.entries()) {
      workers.push(yield* spawn(worker(sc, i), { name: `${sc.kind}${i}` }));
    }
    const cancellers: Task<void>[] = [];
    for (const [i, sc] of s.scripts.entries()) {
      const at = sc.cancelAtMs;
      if (at === null) continue;
      cancellers.push(
        yield* spawn(function* canceller() {
          yield* sleep(at);
          yield* workers[i]!.cancel();
        }),
      );
    }
    // Closing wakes every receiver and fails every sender still waiting, so the storm ends.
    yield* sleep(s.closeAtMs);
    ch.close();
    for (const w of workers) {
      try {
        yield* w;
      } catch (e) {
        if (!(e instanceof TaskCancelledError)) throw e;
      }
    }
    for (const c of cancellers) yield* c;
    for (let r = yield* ch.next(); !r.done; r = yield* ch.next()) drained.push(r.value);
  });
  await root;

  expect(violations).toEqual([]);
  expect(maxHolders).toBeLessThanOrEqual(s.permits);
  expect(holders).toBe(0);
  expect({ available: sem.available, waiting: sem.waiting }).toEqual({ available: s.permits, waiting: 0 });
  expect({ size: ch.size, ...ch.waiting }).toEqual({ size: 0, senders: 0, receivers: 0 });
  expect(limiter.waiting).toBe(0);

  // The channel loses nothing and invents nothing: every value whose send returned is received
  // exactly once, and only values someone tried to send are ever received.
  const all = [...received, ...drained];
  expect(new Set(all).size).toBe(all.length);
  for (const v of all) expect(attempted.has(v)).toBe(true);
  for (const v of sent) expect(all).toContain(v);

  // The token bucket never lends more than it holds: between any two grants, at most
  // burst + elapsed × perSecond tokens.
  for (let i = 0; i < takes.length; i++) {
    for (let j = i; j < takes.length; j++) {
      const allowed = s.burst + ((takes[j]! - takes[i]!) * s.perSecond) / 1000;
      expect(j - i + 1).toBeLessThanOrEqual(allowed + 1e-9);
    }
  }

  expect(h.liveTasks).toBe(0);
  await h.expectClean();
}

describe("load control under cancellation storms", () => {
  it("leaves every permit back, no waiter, no timer and no task, and never over-grants", async () => {
    await fc.assert(fc.asyncProperty(scenario, storm), {
      numRuns: Number(process.env.KEEL_PROPERTY_RUNS ?? 200),
      seed: Number(process.env.KEEL_PROPERTY_SEED ?? 20261201),
    });
  });
});

/**
 * Scenario 3: one deadline travels across three hops; each hop sees only what is left, and asking
 * for more does not extend it (semantics §4).
 * @module
 */
import { formatTaskTree, type Operation, remaining, run, sleep, snapshot, spawn, timeout } from "@keel/core";
import { createNarration, type ScenarioResult } from "./narration.js";

export interface DeadlineTravelFacts {
  /** `remaining()` as each hop saw it on arrival: gateway, orders, inventory. */
  readonly remainingByHop: readonly number[];
  /** `remaining()` inside inventory's own `timeout(2000)`: still the travelling deadline. */
  readonly insideOwnTimeoutMs: number;
  readonly value: string;
  readonly finishedAt: number;
  /** The live task tree, taken at {@link SNAPSHOT_AT}. */
  readonly tree: string;
  readonly treeAt: number;
}

/** The virtual instant of the live snapshot: inventory is in the middle of its query. */
export const SNAPSHOT_AT = 350;
const HOP_WORK_MS = 150;

export async function deadlineTravels(): Promise<ScenarioResult<DeadlineTravelFacts>> {
  const n = createNarration("3. A deadline travels across three hops");
  const remainingByHop: number[] = [];
  let insideOwnTimeoutMs = -1;
  let tree = "";

  /** One hop of the call chain: read the budget, do some work, then call the next hop. */
  function* arrive(name: string): Operation<void> {
    const left = yield* remaining();
    remainingByHop.push(left);
    n.say(`${name}: remaining() = ${left}ms`);
    yield* sleep(HOP_WORK_MS);
  }

  function* inventory(): Operation<string> {
    yield* arrive("inventory");
    return yield* timeout(2000, function* query() {
      insideOwnTimeoutMs = yield* remaining();
      n.say(
        `inventory asks for timeout(2000), yet remaining() = ${insideOwnTimeoutMs}ms: a deadline only shrinks`,
      );
      yield* sleep(HOP_WORK_MS);
      return "in stock";
    });
  }

  function* orders(): Operation<string> {
    yield* arrive("orders");
    const hop = yield* spawn(inventory);
    return yield* hop;
  }

  const gateway = run(
    () =>
      timeout(1000, function* gateway() {
        yield* arrive("gateway");
        const hop = yield* spawn(orders);
        return yield* hop;
      }),
    { name: "gateway", clock: n.clock, onEvent: n.onEvent },
  );
  // A timer on the same virtual clock: it fires while every task waits, like SIGUSR2 on a process.
  n.clock.schedule(SNAPSHOT_AT, () => {
    tree = formatTaskTree(snapshot(gateway));
    n.say("live task tree snapshot taken");
  });

  const value = await gateway;
  n.say(`gateway got "${value}" with ${1000 - n.clock.now()}ms of its budget to spare`);
  return n.finish({
    remainingByHop,
    insideOwnTimeoutMs,
    value,
    finishedAt: n.clock.now(),
    tree,
    treeAt: SNAPSHOT_AT,
  });
}

/**
 * The engines the contract suite runs against. Each gives a queue inside a run, and a harness whose
 * clock drives it: the memory engine on the virtual clock; the BullMQ engine on the real clock
 * against the Redis at 127.0.0.1:6379 (each queue on its own prefix, its keys removed at its end;
 * skipped without Redis, see `redis.ts`).
 */
import { type KeelEvent, type KeelEventType, type Operation, resource, run } from "@keel/core";
import { createHarness } from "@keel/testing";
import { createMemoryQueue, type Queue } from "@keel/worker";
import { useBullQueue } from "@keel/worker/bullmq";
import { redisUp } from "./redis.js";

/** What the contract suite uses of a harness; a real-clock engine gets one without a virtual clock. */
export interface ContractHarness {
  readonly events: KeelEvent[];
  eventsOf<T extends KeelEventType>(type: T): Extract<KeelEvent, { type: T }>[];
  run: typeof run;
  expectClean(): Promise<void>;
}

export interface EngineCase {
  readonly name: string;
  /** Why the suite is skipped for this engine (null: it runs). */
  readonly skip: string | null;
  /**
   * True when the engine runs on the real clock: instants are not reproducible, so the suite
   * compares transitions without their times and skips the tests that pin exact instants.
   */
  readonly realClock: boolean;
  /** How often a test polls the engine's counts while it waits. */
  readonly pollMs: number;
  harness(): ContractHarness;
  open<T>(name: string, options?: { capacity?: number }): Operation<Queue<T>>;
}

export const memoryEngine: EngineCase = {
  name: "memory",
  skip: null,
  realClock: false,
  pollMs: 1,
  harness: () => createHarness(),
  open: <T>(name: string, options: { capacity?: number } = {}) => createMemoryQueue<T>({ name, ...options }),
};

/** The real clock, recording events; the leak check counts tasks started and never settled. */
function realClockHarness(): ContractHarness {
  const events: KeelEvent[] = [];
  const eventsOf = <T extends KeelEventType>(type: T) =>
    events.filter((e) => e.type === type) as Extract<KeelEvent, { type: T }>[];
  return {
    events,
    eventsOf,
    run: ((op, options) => run(op, { ...options, onEvent: (e) => events.push(e) })) as typeof run,
    async expectClean() {
      await new Promise((resolve) => setImmediate(resolve));
      const unsettled = eventsOf("task:start").length - eventsOf("task:settle").length;
      if (unsettled > 0) throw new Error(`leak check failed: ${unsettled} live task(s)`);
    },
  };
}

export const bullEngine: EngineCase = {
  name: "bullmq",
  skip: redisUp ? null : "no Redis at 127.0.0.1:6379",
  realClock: true,
  pollMs: 20,
  harness: realClockHarness,
  open: <T>(name: string) =>
    resource<Queue<T>>(function* bullContractQueue(provide) {
      const queue = yield* useBullQueue<T>({
        name,
        connection: { host: "127.0.0.1", port: 6379 },
        prefix: `keel-contract-${process.pid}-${Math.random().toString(36).slice(2, 8)}`,
      });
      try {
        yield* provide(queue);
      } finally {
        yield* queue.obliterate();
      }
    }),
};

export const engines: readonly EngineCase[] = [memoryEngine, bullEngine];

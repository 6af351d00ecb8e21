/**
 * Poison values (issue 23): whatever a handler throws, the worker keeps running, the job takes the
 * ordinary dead-letter path with an error that describes the value, the next job completes, and
 * neither the event stream nor the logger throws. Run against each engine: the memory engine on
 * the virtual clock, BullMQ on the real Redis (its own prefix, keys removed).
 */
import {
  constant,
  describeThrown,
  type KeelEvent,
  type LogRecord,
  type Operation,
  sleep,
  until,
} from "@keel/core";
import { createHarness } from "@keel/testing";
import {
  createMemoryQueue,
  type DeadLetter,
  isJobThrewError,
  type Queue,
  useWorker,
  type WorkerStats,
} from "@keel/worker";
import { useBullQueue } from "@keel/worker/bullmq";
import { Queue as BullQueue } from "bullmq";
import { afterEach, beforeEach, describe, expect, it, type MockInstance, vi } from "vitest";
import { bullEngine, type ContractHarness, memoryEngine } from "./engines.js";
import { type Poison, poisons } from "./fixtures/poison.js";
import { redisUp, removeKeys } from "./redis.js";

const connection = { host: "127.0.0.1", port: 6379 };

/** What a BullMQ job looks like in Redis once dead-lettered. */
interface BullRecord {
  state: string;
  failedReason: string;
  stacktrace: string[];
}

interface Outcome {
  thrown: unknown;
  dead: readonly DeadLetter<string>[];
  stats: WorkerStats;
  bull: BullRecord | null;
  events: KeelEvent[];
  logged: string[];
}

interface PoisonEngine {
  readonly name: string;
  readonly skip: boolean;
  harness(): ContractHarness;
  /** A queue, with how to read a job as BullMQ stores it (null for the memory engine). */
  open(name: string): Operation<{ queue: Queue<string>; read: ((id: string) => Promise<BullRecord>) | null }>;
  /** Removes what the engine left behind (BullMQ: its prefix's keys). */
  cleanup(): Promise<void>;
  readonly pollMs: number;
}

function memory(): PoisonEngine {
  return {
    name: "memory",
    skip: false,
    harness: () => createHarness(),
    *open(name) {
      return { queue: yield* createMemoryQueue<string>({ name }), read: null };
    },
    cleanup: async () => {},
    pollMs: memoryEngine.pollMs,
  };
}

function bull(): PoisonEngine {
  const prefix = `keel-poison-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  return {
    name: "bullmq",
    skip: !redisUp,
    harness: bullEngine.harness,
    *open(name) {
      const queue = yield* useBullQueue<string>({ name, connection, prefix });
      const read = async (id: string): Promise<BullRecord> => {
        const q = new BullQueue(name, { connection, prefix });
        try {
          const job = await q.getJob(id);
          if (!job) throw new Error(`no job ${id}`);
          return {
            state: await job.getState(),
            failedReason: job.failedReason,
            stacktrace: job.stacktrace ?? [],
          };
        } finally {
          await q.close();
        }
      };
      return { queue, read };
    },
    cleanup: () => removeKeys(prefix),
    pollMs: bullEngine.pollMs,
  };
}

/** Runs a worker on a queue holding a poison job `p` then an ordinary job `ok`, until both ended. */
async function runPoison(engine: PoisonEngine, poison: Poison): Promise<Outcome> {
  const h = engine.harness();
  const logged: string[] = [];
  let thrown: unknown;
  try {
    const outcome = await h.run(
      function* poisonRun() {
        const { queue, read } = yield* engine.open(`poison-${Math.random().toString(36).slice(2, 8)}`);
        try {
          const worker = yield* useWorker(
            queue,
            function* handler(job) {
              if (job.data === "poison") {
                thrown = poison.make();
                throw thrown;
              }
            },
            { retry: { attempts: 2, backoff: constant(10) }, timeoutMs: 10_000 },
          );
          yield* queue.add("poison", { id: "p", ttlMs: 60_000 });
          yield* queue.add("ok", { id: "ok", ttlMs: 60_000 });
          for (;;) {
            const c = yield* queue.counts();
            if (c.completed + c.deadLettered >= 2) break;
            yield* sleep(engine.pollMs);
          }
          const dead = yield* queue.engine.deadLetters();
          const stats = yield* worker.stats();
          const bull = read ? yield* until(read("p")) : null;
          return { dead, stats, bull };
        } finally {
          if (read) yield* (queue as Queue<string> & { obliterate(): Operation<void> }).obliterate();
        }
      },
      {
        // Every record, as a logger that prints the error would.
        logEvents: "debug",
        logger: (r: LogRecord) => {
          logged.push(`${r.message} ${describeThrown(r.fields.error)}`);
        },
      },
    );
    await h.expectClean();
    return { ...outcome, thrown, events: h.events, logged };
  } finally {
    await engine.cleanup();
  }
}

const cases: PoisonEngine[] = [memory(), bull()];

for (const engine of cases) {
  describe.skipIf(engine.skip)(`poison values: ${engine.name} engine`, () => {
    let printed: MockInstance[] = [];
    beforeEach(() => {
      printed = [vi.spyOn(console, "error"), vi.spyOn(console, "warn")];
    });
    afterEach(() => {
      for (const spy of printed) spy.mockRestore();
    });

    it.each(poisons.map((p) => [p.name, p] as const))(
      "a handler that throws %s: the job is dead-lettered as rejected, the worker goes on",
      async (_name, poison) => {
        const o = await runPoison(engine, poison);
        // The worker kept running: the next job completed, the poison one ended once.
        expect(o.stats.completed).toBe(1);
        expect(o.stats.deadLettered.rejected).toBe(1);
        expect(o.stats.retried).toBe(0);
        expect(o.dead.map((d) => [d.id, d.reason])).toEqual([["p", "rejected"]]);
        const error = o.dead[0]!.error as Error & { code?: unknown; thrown?: unknown };
        const huge = engine.name === "bullmq" && /1 MB/.test(poison.name);
        if (huge) expect(error.message).toMatch(/^x{2000}… \(998000 more characters\)$/);
        else expect(error.message).toMatch(poison.says);
        if (poison.carried === "wrapped") {
          expect(isJobThrewError(error)).toBe(true);
          expect(error.name).toBe("JobThrewError");
          expect(error.message.length).toBeLessThan(400);
          if (engine.name === "memory") expect(Object.is(error.thrown, o.thrown)).toBe(true);
        } else if (poison.carried === "kept" && engine.name === "memory") expect(error).toBe(o.thrown);
        // The event stream carried the same error; the logger saw every record.
        const deadEvent = o.events.find(
          (e) => e.type === "worker:job" && e.jobId === "p" && e.transition === "dead-letter",
        ) as { error?: unknown } | undefined;
        expect(deadEvent?.error).toBeDefined();
        expect(o.logged.some((l) => l.includes("worker:job"))).toBe(true);
        for (const spy of printed) expect(spy).not.toHaveBeenCalled();
        if (o.bull) {
          expect(o.bull.state).toBe("failed");
          expect(typeof o.bull.failedReason).toBe("string");
          expect(o.bull.failedReason.length).toBeLessThan(2100);
          if (!huge) expect(o.bull.failedReason).toMatch(poison.says);
          expect(o.bull.stacktrace.every((s) => typeof s === "string" && s.length <= 8100)).toBe(true);
        }
      },
    );
  });
}

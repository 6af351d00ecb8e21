/**
 * A poison job cannot crash-loop a fleet (issue 23): a job whose every delivery makes its worker
 * process die is dead-lettered as `stalled` after `maxStalls + 1` deliveries, while the other jobs
 * complete once and a supervisor restarts the dead processes. Real processes against a Redis of the
 * test's own (`startRedis`): the test controls every key and every stall check on it, and a test
 * process that dies mid-way leaves nothing on the shared Redis. And `maxStalls: 0` in one process:
 * a job whose holder vanished is dead-lettered at its first stall, unrun. Waits are on conditions,
 * with one hang guard; skipped without `redis-server`.
 */
import { type KeelEvent, run, sleep, until } from "@keel/core";
import { isJobStalledOutError, useWorker } from "@keel/worker";
import { useBullQueue } from "@keel/worker/bullmq";
import { Worker as BullWorker } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Child, type Exit, startChild } from "../../core/test/support/child.js";
import { hasRedisServer, type OwnRedis, startRedis } from "./fixtures/redis-server.js";

const fixture = new URL("./fixtures/stall-worker.ts", import.meta.url);
/** Short, so that a stall is found within two checks of about a second each. */
const LOCK_MS = 1000;
const MAX_STALLS = 2;
/** The hang guard of the whole test: a bound for a loaded machine, not a timing check. */
const GUARD_MS = 60_000;

let server: OwnRedis;
beforeAll(async () => {
  if (hasRedisServer) server = await startRedis();
});
afterAll(async () => {
  await server?.stop();
});

/** Worker processes that a supervisor restarts when they die, as a fleet's would. */
class Fleet {
  readonly deaths: Exit[] = [];
  readonly all: Child[] = [];
  readonly live: Child[] = [];
  private stopping = false;

  constructor(
    private readonly args: string[],
    size: number,
  ) {
    for (let i = 0; i < size; i++) this.start();
  }

  private start(): void {
    const child = startChild(fixture, ...this.args);
    this.all.push(child);
    this.live.push(child);
    void child.exited.then((exit) => {
      this.live.splice(this.live.indexOf(child), 1);
      if (this.stopping) return;
      this.deaths.push(exit);
      this.start();
    });
  }

  /** Every line the processes printed, the dead ones' included. */
  lines(): string[] {
    return this.all.flatMap((c) => c.stdoutLines());
  }

  /**
   * SIGTERM to the live processes (no restart), resolved with their exits. Each is first waited
   * for to be ready (`main` installs its signal handlers): a process restarted a moment ago may
   * still be starting on a loaded machine, and a SIGTERM then would only show Node's default.
   */
  async stop(): Promise<Exit[]> {
    this.stopping = true;
    const live = [...this.live];
    await Promise.all(live.map((c) => c.waitForLine("ready").catch(() => {})));
    for (const c of live) c.process.kill("SIGTERM");
    return Promise.all(live.map((c) => c.exited));
  }
}

describe.skipIf(!hasRedisServer)(
  "a poison job cannot crash-loop a fleet (real Redis, real processes)",
  () => {
    it("a job whose every delivery kills its process is dead-lettered as stalled after maxStalls + 1 deliveries; the others complete once and the deaths stop", async () => {
      const prefix = "keel-stalls";
      const connection = server.connection;
      const redis = new Redis({ ...connection, maxRetriesPerRequest: null });
      const fleet = new Fleet([String(server.port), prefix, String(LOCK_MS), String(MAX_STALLS)], 2);
      const guardAt = performance.now() + GUARD_MS;
      try {
        const r = await run(function* test() {
          const queue = yield* useBullQueue<string>({ name: "stalls", connection, prefix });
          /** Polls `done` until it holds; past the hang guard, fails with what the fleet did. */
          function* waitFor(what: string, done: () => Generator<unknown, boolean, unknown>) {
            while (!(yield* done())) {
              if (performance.now() > guardAt) {
                const deliveries = yield* until(redis.hgetall(`${prefix}:deliveries`));
                throw new Error(
                  `hang guard: no ${what} within ${GUARD_MS} ms; deaths ${JSON.stringify(fleet.deaths)}, ` +
                    `deliveries ${JSON.stringify(deliveries)}, counts ${JSON.stringify(yield* queue.counts())}`,
                );
              }
              yield* sleep(50);
            }
          }
          yield* until(Promise.all(fleet.live.map((c) => c.waitForLine("ready"))));
          yield* queue.add("poison", { id: "poison" });
          for (let i = 0; i < 8; i++) yield* queue.add(`p${i}`, { id: `a${i}` });
          yield* waitFor("dead letter and 8 completions", function* () {
            const c = yield* queue.counts();
            return c.deadLettered === 1 && c.completed === 8;
          });
          const deathsAtDeadLetter = fleet.deaths.length;
          // The loop has stopped: 8 more jobs complete on the live processes, and nobody dies.
          for (let i = 0; i < 8; i++) yield* queue.add(`q${i}`, { id: `b${i}` });
          yield* waitFor("8 more completions", function* () {
            return (yield* queue.counts()).completed === 16;
          });
          return {
            deathsAtDeadLetter,
            counts: yield* queue.counts(),
            deadLetters: yield* queue.deadLetters(),
            deliveries: yield* until(redis.hgetall(`${prefix}:deliveries`)),
            runs: yield* until(redis.hgetall(`${prefix}:runs`)),
            job: yield* until(redis.hgetall(`${prefix}:stalls:poison`)),
            failed: yield* until(redis.zrange(`${prefix}:stalls:failed`, "0", "-1")),
          };
        });
        const deaths = [...fleet.deaths];
        const lines = fleet.lines();
        const exits = await fleet.stop();

        // maxStalls + 1 deliveries of the poison job, each a process death; then none.
        expect(r.deliveries.poison).toBe(String(MAX_STALLS + 1));
        expect(deaths.map((d) => d.signal ?? d.code)).toEqual([1, "SIGKILL", 1]);
        expect(r.deathsAtDeadLetter).toBe(MAX_STALLS + 1);
        expect(lines.filter((l) => l === "started poison")).toHaveLength(MAX_STALLS + 1);
        // BullMQ's failed state and reason, kept in Redis.
        expect(r.failed).toEqual(["poison"]);
        expect(r.job).toMatchObject({ failedReason: "job stalled more than allowable limit", stc: "3" });
        // Read back as a Keel dead letter, reason `stalled`, with an error that says what happened.
        expect(r.deadLetters).toHaveLength(1);
        const [dead] = r.deadLetters;
        expect(dead).toMatchObject({ id: "poison", data: "poison", reason: "stalled", history: [] });
        expect(isJobStalledOutError(dead!.error)).toBe(true);
        expect((dead!.error as Error).message).toMatch(
          /^stalls\/poison: stalled more than maxStalls times \(3 stalls\): .*process.*died/,
        );
        // The process that fetched it after its last stall reported the dead letter as an event.
        expect(lines).toContain("dead-letter poison stalled");
        // Every other job completed exactly once, delivered once.
        const others = [...Array(8).keys()].flatMap((i) => [`a${i}`, `b${i}`]).sort();
        expect(Object.keys(r.runs).sort()).toEqual(others);
        expect(Object.values(r.runs).every((n) => n === "1")).toBe(true);
        expect(
          Object.entries(r.deliveries)
            .filter(([id]) => id !== "poison")
            .every(([, n]) => n === "1"),
        ).toBe(true);
        expect(r.counts).toEqual({ waiting: 0, delayed: 0, active: 0, completed: 16, deadLettered: 1 });
        // No death after the dead letter; the live processes shut down on SIGTERM by themselves.
        expect(fleet.deaths).toHaveLength(MAX_STALLS + 1);
        expect(exits.map((e) => e.signal)).toEqual([null, null]);
      } finally {
        await fleet.stop();
        redis.disconnect();
      }
    }, 75_000);

    it("maxStalls 0: a job whose holder vanished is dead-lettered at its first stall, unrun, with a worker:job event", async () => {
      const prefix = "keel-stalls-zero";
      const connection = server.connection;
      // A holder that takes the job and vanishes without a word: its lock lapses.
      const holder = new BullWorker("zero", null, { connection, prefix, autorun: false, lockDuration: 300 });
      const events: KeelEvent[] = [];
      const guardAt = performance.now() + GUARD_MS;
      try {
        const r = await run(
          function* test() {
            const queue = yield* useBullQueue<string>({
              name: "zero",
              connection,
              prefix,
              lockMs: 300,
              maxStalls: 0,
            });
            yield* queue.add("poison", { id: "z1" });
            const held = yield* until(holder.getNextJob("vanished"));
            yield* until(holder.close(true));
            const ran: string[] = [];
            const sunk: string[] = [];
            const worker = yield* useWorker(
              queue,
              function* handle(job) {
                ran.push(job.id);
              },
              {
                *deadLetter(letter) {
                  sunk.push(`${letter.id}:${letter.reason}`);
                },
              },
            );
            while ((yield* queue.counts()).deadLettered < 1) {
              if (performance.now() > guardAt)
                throw new Error(`hang guard: no dead letter within ${GUARD_MS} ms`);
              yield* sleep(50);
            }
            const stats = yield* worker.stats();
            return { held: held?.id, ran, sunk, stats, deadLetters: yield* queue.deadLetters() };
          },
          { onEvent: (e) => events.push(e) },
        );
        expect(r.held).toBe("z1");
        expect(r.ran).toEqual([]);
        // Dead-lettered by the worker, as any dead letter: counted, and given to its sink.
        expect(r.stats.deadLettered.stalled).toBe(1);
        expect(r.sunk).toEqual(["z1:stalled"]);
        expect(r.deadLetters).toMatchObject([{ id: "z1", reason: "stalled" }]);
        expect((r.deadLetters[0]!.error as Error).message).toMatch(
          /^zero\/z1: stalled more than maxStalls times \(1 stall\)/,
        );
        const deadLetterEvents = events.filter(
          (e) => e.type === "worker:job" && e.transition === "dead-letter",
        );
        expect(deadLetterEvents).toMatchObject([
          { queue: "zero", jobId: "z1", attempt: 1, reason: "stalled" },
        ]);
        expect(isJobStalledOutError((deadLetterEvents[0] as { error?: unknown }).error)).toBe(true);
      } finally {
        await holder.close(true).catch(() => {});
      }
    });
  },
);

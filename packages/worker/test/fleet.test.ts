/**
 * The counting test (issue 23, "How it is tested"), Jepsen-style and bounded: N jobs through a fleet
 * of two worker processes (`fixtures/fleet-worker.ts`, concurrency 4 each, `lockMs` 1,000) on a
 * Redis of the test's own (AOF, `appendfsync always`; the shared one is never touched), worker B
 * reaching it through a TCP proxy. The jobs are added in batches, one before each fault and one
 * after the last, so that the workers are busy whenever a fault comes, however fast the machine.
 * Each fault is injected once STEP jobs of its batch are done (never at a wall-clock time), and
 * waited out on conditions:
 *
 * 1. Redis paused (SIGSTOP) until every worker says the engine is down and ≥ 1.5 s (past `lockMs`:
 *    locks lapse), then resumed;
 * 2. Redis SIGKILLed, then restarted on its AOF;
 * 3. worker B partitioned (the proxy holds every byte) as long, then let through;
 * 4. worker B's connections reset (RST);
 * 5. worker A SIGKILLed mid-run, and a new process (A2) started in its place.
 *
 * After each of the first four, the test waits until every job reported `stalled` so far has come
 * back and completed, so that one job meets one fault at most. Each run of a job is a line its
 * process appends to a file (not a count in Redis, which the very fault under test could lose, or
 * fail the attempt with). At the end every job id's state is read back from Redis, and: none is lost
 * (every one completed, none dead-lettered); no worker process ended on its own (the killed one
 * aside, each exits 143 at SIGTERM); and a job ran more than once only where the workers guide
 * allows a re-run, each extra run paid for by one cause: the job was in flight in the process that
 * was killed, or a worker reported it `stalled` (its lock lapsed, or its outcome could not be
 * recorded). One line on stdout sums the run up.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { run } from "@keel/core";
import { useBullQueue } from "@keel/worker/bullmq";
import { Queue as BullQueue } from "bullmq";
import { afterEach, describe, expect, it } from "vitest";
import { type Child, startChild } from "../../core/test/support/child.js";
import { hasRedisServer, type OwnRedis, startRedis } from "./fixtures/redis-server.js";
import { startProxy, type TcpProxy } from "./fixtures/tcp-proxy.js";

const fleetWorker = new URL("./fixtures/fleet-worker.ts", import.meta.url);
/** Jobs added before each fault, and after the last one (once A2 is ready). */
const BATCHES = [80, 80, 80, 80, 80, 100];
/** Jobs in the run. */
const N = BATCHES.reduce((sum, n) => sum + n, 0);
/** Jobs of a batch done before its fault: the rest of the batch keeps the workers busy through it. */
const STEP = 25;
/** How long a pause or a partition lasts at least: past `lockMs` (1,000), so that locks lapse. */
const OUTAGE_MS = 1_500;
/** The hang guard of each wait, not a timing check. */
const GUARD_MS = 30_000;
const PREFIX = "fleet";
/** The lines that end a delivery (see the fixture). */
const ENDINGS = new Set(["done", "stalled", "retry", "release", "dead-letter"]);

const sleepMs = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A worker process of the fleet. */
interface Member {
  readonly name: string;
  readonly child: Child;
  /** Set just before the test kills it: its death is not a failure. */
  killed: boolean;
}

/** The test's supervisor: the worker processes it started, and what they said. */
class Fleet {
  readonly members: Member[] = [];
  /** Batches of jobs added so far. */
  batches = 0;
  constructor(private readonly runsFile: string) {}

  start(name: string, port: number): Member {
    const m = { name, child: startChild(fleetWorker, String(port), PREFIX, this.runsFile), killed: false };
    this.members.push(m);
    return m;
  }

  async kill(m: Member): Promise<void> {
    m.killed = true;
    m.child.process.kill("SIGKILL");
    await m.child.exited;
  }

  /** The ids each line starting with `word` names, over every process, with who said it and the rest of the line. */
  said(word: string): { id: string; by: string; rest: string }[] {
    return this.members.flatMap((m) =>
      m.child.stdoutLines().flatMap((l) => {
        const [w, id = "", ...rest] = l.split(" ");
        return w === word ? [{ id, by: m.name, rest: rest.join(" ") }] : [];
      }),
    );
  }

  /** Jobs completed as the workers reported them (a lower bound: a completion may land unreported). */
  done(): number {
    return new Set(this.said("done").map((s) => s.id)).size;
  }

  engine(m: Member): string {
    return m.child.stdoutLines().findLast((l) => l.startsWith("engine ")) ?? "engine up";
  }

  downs(m: Member): number {
    return m.child.stdoutLines().filter((l) => l === "engine down").length;
  }

  /** The jobs `m` had started and not ended (its stdout is a pipe: written synchronously). */
  inFlight(m: Member): Set<string> {
    const ids = new Set<string>();
    for (const l of m.child.stdoutLines()) {
      const [what = "", id = ""] = l.split(" ");
      if (what === "started") ids.add(id);
      else if (ENDINGS.has(what)) ids.delete(id);
    }
    return ids;
  }

  /** Polls `ready` every 25 ms; fails at once if a worker the test did not kill has exited. */
  async until(what: string, ready: () => boolean | Promise<boolean>): Promise<void> {
    const from = performance.now();
    for (;;) {
      const dead = this.members.find((m) => !m.killed && m.child.hasExited);
      if (dead) throw new Error(`worker ${dead.name} exited on its own, waiting for ${what}\n${this.dump()}`);
      if (await ready()) return;
      if (performance.now() - from > GUARD_MS)
        throw new Error(`hang guard: still waiting for ${what}\n${this.dump()}`);
      await sleepMs(25);
    }
  }

  /** Until every live worker (or those of `only`) last said `engine <state>`. */
  engines(state: "up" | "down", only = this.members.filter((m) => !m.killed)): Promise<void> {
    return this.until(`${only.map((m) => m.name).join(", ")}: engine ${state}`, () =>
      only.every((m) => this.engine(m) === `engine ${state}`),
    );
  }

  private dump(): string {
    return this.members
      .map((m) => {
        const out = m.child.stdoutLines().slice(-30).join("\n");
        return `--- ${m.name}: stdout (last 30 lines)\n${out}\nstderr:\n${m.child.stderr()}`;
      })
      .join("\n");
  }
}

let redis: OwnRedis | null = null;
let proxy: TcpProxy | null = null;
let dir: string | null = null;
afterEach(async () => {
  await proxy?.close();
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
  redis = proxy = dir = null;
});

describe.skipIf(!hasRedisServer)(
  "a fleet of worker processes under faults (a Redis of the test's own)",
  () => {
    it(`${N} jobs through 2 processes; Redis paused and killed, a worker partitioned, reset and killed: none lost, a job run again only where a process died or a stall was reported`, async () => {
      const began = performance.now();
      const own = (redis = await startRedis({ appendonly: true, appendfsync: "always" }));
      const toB = (proxy = await startProxy(own.connection));
      dir = mkdtempSync(join(tmpdir(), "keel-fleet-"));
      const runsFile = join(dir, "runs");
      writeFileSync(runsFile, "");
      const fleet = new Fleet(runsFile);
      const ids = Array.from({ length: N }, (_, i) => `j${i}`);
      const reader = new BullQueue("fleet", { connection: { ...own.connection }, prefix: PREFIX });
      reader.on("error", () => {});
      try {
        /** Until every job reported stalled so far is completed in Redis (read only while Redis is up). */
        const stalledCameBack = () =>
          fleet.until("the stalled jobs completed", async () => {
            const stalled = [...new Set(fleet.said("stalled").map((s) => s.id))];
            const states = await Promise.all(stalled.map((id) => reader.getJobState(id)));
            return states.every((s) => s === "completed");
          });
        const faults: string[] = [];

        const a = fleet.start("A", own.port);
        const b = fleet.start("B", toB.port);
        await Promise.all([a.child.waitForLine("ready"), b.child.waitForLine("ready")]);
        let added = 0;
        /** Adds the next batch (Redis up), and waits until STEP of its jobs are done. */
        const nextBatch = async () => {
          const from = added;
          added += BATCHES[fleet.batches++] ?? 0;
          const target = fleet.done() + STEP;
          await run(function* add() {
            const queue = yield* useBullQueue<number>({
              name: "fleet",
              connection: own.connection,
              prefix: PREFIX,
            });
            for (let i = from; i < added; i++) yield* queue.add(i, { id: `j${i}` });
          });
          await fleet.until(`${target} jobs done`, () => fleet.done() >= target);
        };

        // 1. Redis paused past lockMs.
        await nextBatch();
        faults.push(`Redis paused at ${fleet.done()} done`);
        own.pause();
        const pausedAt = performance.now();
        await fleet.engines("down");
        await fleet.until(`${OUTAGE_MS} ms paused`, () => performance.now() - pausedAt >= OUTAGE_MS);
        own.resume();
        await fleet.engines("up");
        await stalledCameBack();

        // 2. Redis killed, restarted on its AOF.
        await nextBatch();
        faults.push(`Redis SIGKILLed and restarted at ${fleet.done()}`);
        await own.kill();
        await fleet.engines("down");
        await own.restart();
        await fleet.engines("up");
        await stalledCameBack();

        // 3. B partitioned past lockMs: A's stalled check takes B's jobs back.
        await nextBatch();
        faults.push(`B partitioned at ${fleet.done()}`);
        toB.stall();
        const partitionedAt = performance.now();
        await fleet.engines("down", [b]);
        await fleet.until(
          `${OUTAGE_MS} ms partitioned`,
          () => performance.now() - partitionedAt >= OUTAGE_MS,
        );
        toB.resume();
        await fleet.engines("up", [b]);
        await stalledCameBack();

        // 4. B's connections reset.
        await nextBatch();
        faults.push(`B's connections reset at ${fleet.done()}`);
        toB.reset();
        await stalledCameBack();

        // 5. A killed mid-run; a new process takes its place, and the last batch goes to B and A2.
        await nextBatch();
        faults.push(`A SIGKILLed at ${fleet.done()}, A2 started`);
        await fleet.kill(a);
        const inFlightAtKill = fleet.inFlight(a);
        const a2 = fleet.start("A2", own.port);
        await a2.child.waitForLine("ready");
        await nextBatch();

        await fleet.until(
          `all ${N} completed in Redis`,
          async () => (await reader.getCompletedCount()) === N,
        );
        const completedAfterMs = performance.now() - began;
        for (const m of fleet.members) if (!m.killed) m.child.process.kill("SIGTERM");
        const exits = await Promise.all(fleet.members.map((m) => m.child.exited));

        // Every job id's final state, read back from Redis.
        const states = await Promise.all(ids.map(async (id) => [id, await reader.getJobState(id)] as const));
        const counts = await reader.getJobCounts(
          "wait",
          "prioritized",
          "delayed",
          "active",
          "completed",
          "failed",
        );

        const runs = new Map<string, number>();
        const spent: string[] = [];
        for (const line of readFileSync(runsFile, "utf8").split("\n")) {
          const [, id, attempt] = line.split(" ");
          if (id) runs.set(id, (runs.get(id) ?? 0) + 1);
          if (id && attempt !== "1") spent.push(`${id} attempt ${attempt}`);
        }
        const stalls = fleet.said("stalled");
        /** Why `id` may have run again: one cause per extra run allowed. */
        const causes = (id: string) => [
          ...(inFlightAtKill.has(id) ? ["in flight in A at its death"] : []),
          ...stalls.filter((s) => s.id === id).map((s) => `stalled in ${s.by} (${s.rest})`),
        ];
        const again = ids.filter((id) => (runs.get(id) ?? 0) > 1);
        const unexplained = again.filter((id) => (runs.get(id) ?? 0) - 1 > causes(id).length);

        const twice = again.map((id) => `${id} x${runs.get(id)}: ${causes(id).join(", ") || "no cause"}`);
        console.log(
          `fleet: N=${N}, processes ${fleet.members.map((m) => m.name).join(", ")}; ` +
            `all completed at ${(completedAfterMs / 1000).toFixed(1)} s, ended at ${((performance.now() - began) / 1000).toFixed(1)} s; ` +
            `faults (at jobs done): ${faults.join("; ")}; in flight in A at its death: ${[...inFlightAtKill].join(" ") || "none"}; ` +
            `stalled reports: ${stalls.length} (${stalls.filter((s) => s.rest === "lock-lost").length} lock-lost); ` +
            `run twice: ${again.length}${again.length ? ` (${twice.join("; ")})` : ""}`,
        );

        // None lost: every id completed in Redis, and nothing left anywhere else.
        expect(states.filter(([, s]) => s !== "completed")).toEqual([]);
        expect(counts).toEqual({ wait: 0, prioritized: 0, delayed: 0, active: 0, completed: N, failed: 0 });
        expect([...fleet.said("dead-letter"), ...fleet.said("retry"), ...fleet.said("release")]).toEqual([]);
        // Only the killed process died; every other one shut down by itself at SIGTERM (143).
        expect(exits.map((e, i) => `${fleet.members[i]?.name} ${e.signal ?? e.code}`)).toEqual([
          "A SIGKILL",
          "B 143",
          "A2 143",
        ]);
        // Nothing on stderr but main's notice of the SIGTERM: no error, no warning.
        const stderr = fleet.members.flatMap((m) =>
          m.child
            .stderr()
            .split("\n")
            .filter((l) => l !== "" && !l.startsWith("keel: SIGTERM received"))
            .map((l) => `${m.name}: ${l}`),
        );
        expect(stderr).toEqual([]);
        // The faults took effect: each worker saw Redis go away twice, B once more; A held jobs when it died.
        expect(fleet.downs(a)).toBeGreaterThanOrEqual(2);
        expect(fleet.downs(b)).toBeGreaterThanOrEqual(3);
        expect(inFlightAtKill.size).toBeGreaterThan(0);
        // Every job ran (a completion is its handler's return), again only with a cause for each extra run.
        expect(ids.filter((id) => !runs.has(id))).toEqual([]);
        expect(
          unexplained.map((id) => `${id} ran ${runs.get(id)} times: ${causes(id).join(", ") || "no cause"}`),
        ).toEqual([]);
        expect(Math.max(...runs.values())).toBeLessThanOrEqual(2);
        // A run again is not the job's fault: no fault spent an attempt.
        expect(spent).toEqual([]);
      } finally {
        await reader.close();
      }
    }, 60_000);
  },
);

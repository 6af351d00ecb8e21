/**
 * Pins what the demo narrates: each scenario's values and virtual times, a few of its lines, and the
 * leak check, so `npm run demo` cannot drift from the runtime unnoticed.
 */
import { spawn, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { redisUp } from "../../packages/worker/test/redis.js";
import { asyncCleanup } from "../src/scenarios/async-cleanup.js";
import { deadlineTravels } from "../src/scenarios/deadline-travels.js";
import { hungCleanup } from "../src/scenarios/hung-cleanup.js";
import { innerTimeoutCaught } from "../src/scenarios/inner-timeout-caught.js";
import type { ScenarioResult } from "../src/scenarios/narration.js";
import { outerDeadlineWins } from "../src/scenarios/outer-deadline-wins.js";
import { shieldedFlush } from "../src/scenarios/shielded-flush.js";

function expectClean(result: ScenarioResult<unknown>): void {
  expect(result.leftover).toEqual({ liveTasks: 0, pendingTimers: 0 });
}

describe("the demo's scenarios", () => {
  it("1: an inner timeout that fires and is caught leaves the outer armed and the task running", async () => {
    const r = await innerTimeoutCaught();

    expect(r.facts).toEqual({
      value: "fallback",
      caughtAt: 100,
      caughtLabel: "timeout(100)",
      outerRemainingMs: 400,
      stateAfterCatch: "running",
      cancellationCountAfterCatch: 0,
      finishedAt: 300,
      fired: ["timeout(100)@100"],
    });
    expect(r.lines).toContain(
      "[t=100ms] inner timeout fired; caught TimeoutError, outer still armed (remaining() = 400ms, task running, 0 cancellation requests)",
    );
    expectClean(r);
  });

  it("2: an outer deadline that passes first, or at the same instant, wins over the inner one", async () => {
    const r = await outerDeadlineWins();

    expect(r.facts).toEqual({
      innerSaw: "Cancelled(timeout by timeout(100))",
      errorLabel: "timeout(100)",
      caughtAt: 100,
      elapsedMs: 100,
      equalDeadlineLabel: "timeout(200)",
      equalCaughtAt: 300,
      fired: ["timeout(100)@100", "timeout(200)@300", "timeoutAt(300)@300"],
    });
    expect(r.lines).toContain(
      "[t=300ms]   · timeoutAt(300) in handler stays silent: an enclosing claim wins",
    );
    expectClean(r);
  });

  it("3: a deadline travels across three hops, each seeing only what is left", async () => {
    const r = await deadlineTravels();

    expect(r.facts.remainingByHop).toEqual([1000, 850, 700]);
    expect(r.facts.insideOwnTimeoutMs).toBe(550);
    expect(r.facts.value).toBe("in stock");
    expect(r.facts.finishedAt).toBe(600);
    expect(r.facts.treeAt).toBe(350);
    expect(r.facts.tree.split("\n")).toEqual([
      expect.stringMatching(
        /^gateway#\d+ running 350ms, deadline in 650ms, waiting on join orders#\d+ for 200ms$/,
      ),
      expect.stringMatching(
        /^ {2}orders#\d+ running 200ms, deadline in 650ms, waiting on join inventory#\d+ for 50ms$/,
      ),
      expect.stringMatching(
        /^ {4}inventory#\d+ running 50ms, deadline in 650ms, waiting on sleep\(150\) for 50ms, wakes in 100ms$/,
      ),
    ]);
    expect(r.lines).toContain("[t=150ms] orders: remaining() = 850ms");
    expectClean(r);
  });

  it("4: async cleanup in finally, two yield* deep, completes before cancel() settles", async () => {
    const r = await asyncCleanup();

    expect(r.facts).toEqual({
      cleanupStartedAt: 100,
      flushedAt: 220,
      closedAt: 300,
      cancelSettledAt: 300,
      connectionState: "cancelled",
      cancelReason: expect.stringContaining("service is shutting down"),
    });
    expectClean(r);
  });

  it("5: a hung cleanup is cut at its budget, reported as cleanup:overrun, and outer finally still runs", async () => {
    const r = await hungCleanup();

    expect(r.facts).toEqual({
      overruns: [{ at: 350, budgetMs: 250, waitingOn: "sleep(10000)" }],
      outerFinallyAt: 350,
      hungStepFinished: false,
      cancelSettledAt: 350,
      exporterState: "cancelled",
    });
    expect(r.lines).toContain(
      "[t=350ms]   · cleanup:overrun in service/exporter: over its 250ms budget, cut while waiting on sleep(10000)",
    );
    expectClean(r);
  });

  it("6: a shielded flush finishes before the cancellation is delivered, which is then reported as delayed", async () => {
    const r = await shieldedFlush();

    expect(r.facts).toEqual({
      cancelRequestedAt: 50,
      flushedAt: 200,
      deliveredAt: 200,
      deliveredKind: "cancel",
      shieldDelays: [{ at: 200, delayedMs: 150 }],
      ranPastShield: false,
      writerState: "cancelled",
    });
    expectClean(r);
  });
});

const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
const tsx = (script: string) => ["--import", "tsx", "--conditions=source", script];

describe("npm run tour", () => {
  it("prints all six scenarios and the live task tree, and exits 0", () => {
    const result = spawnSync(process.execPath, tsx("examples/src/tour.ts"), {
      cwd: repoRoot,
      encoding: "utf8",
      timeout: 15_000,
    });

    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
    for (const title of ["1. ", "2. ", "3. ", "4. ", "5. ", "6. "])
      expect(result.stdout).toMatch(new RegExp(`^${title.replace(".", "\\.")}`, "m"));
    expect(result.stdout).toContain("Live task tree of scenario 3 at t=350ms:");
    expect(result.stdout).toMatch(/^ {6}inventory#\d+ running 50ms, .*waiting on sleep\(150\)/m);
  });
});

describe("npm run demo: the worker", () => {
  it("runs every job to one outcome against the flaky API, then prints the summary", async () => {
    const result = await runDemo(["--jobs", "120"]);

    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("Keel worker demo: 120 jobs against a flaky API");
    expect(result.stdout).toMatch(
      /^done 120 \(completed \d+, dead-lettered \d+\) · retried \d+ · in flight 0 · waiting 0/m,
    );
    expect(result.stdout).toMatch(/^handler time of completed jobs: p50 \d+ ms, p99 \d+ ms$/m);
    expect(result.stdout).toMatch(/^dead letters by reason: expired \d+, exhausted \d+, rejected \d+$/m);
  }, 90_000);

  it("Ctrl-C shuts it down within its budget and prints what it released", async () => {
    const result = await runDemo(["--jobs", "20000"], (stdout) => /^done \d+/m.test(stdout));

    expect(result.stderr).toContain("keel: SIGINT received; shutting down");
    expect(result.stdout).toMatch(
      /^shutdown: \d+ in flight at the stop, \d+ finished while draining, \d+ released/m,
    );
    // drainMs 2000 + cleanup budget 1000 + close cap 1000, plus room for a very busy machine.
    expect(result.afterSignalMs).toBeLessThan(4000 + 6000);
    expect(result.code).toBe(130);
  }, 90_000);

  it.skipIf(!redisUp)(
    "with --bullmq, Ctrl-C shuts it down within its budget too, prints what it released, and leaves no key in Redis",
    async () => {
      const result = await runDemo(["--bullmq", "--jobs", "20000"], (stdout) => /^done \d+/m.test(stdout));

      expect(result.stdout).toContain("Keel worker demo (BullMQ on 127.0.0.1:6379): 20000 jobs");
      expect(result.stderr).toBe(
        "keel: SIGINT received; shutting down (budget 6000 ms; send it again to exit now)\n",
      );
      expect(result.stdout).toMatch(
        /^shutdown: \d+ in flight at the stop, \d+ finished while draining, \d+ released/m,
      );
      expect(result.afterSignalMs).toBeLessThan(4000 + 6000);
      expect(result.code).toBe(130);
      // The queue's keys go once the worker has drained (a draining job needs its own).
      expect(await keysOf(`keel-demo-${result.pid}`)).toEqual([]);
    },
    90_000,
  );
});

async function keysOf(prefix: string): Promise<string[]> {
  const redis = new Redis({ host: "127.0.0.1", port: 6379, maxRetriesPerRequest: null });
  try {
    return await redis.keys(`${prefix}:*`);
  } finally {
    redis.disconnect();
  }
}

/** Runs the demo as `npm run demo` does; with `interruptWhen`, sends SIGINT once stdout satisfies it. */
function runDemo(
  args: string[],
  interruptWhen?: (stdout: string) => boolean,
): Promise<{ code: number | null; stdout: string; stderr: string; afterSignalMs: number; pid: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...tsx("examples/src/demo.ts"), ...args], { cwd: repoRoot });
    let stdout = "";
    let stderr = "";
    let signalledAt = 0;
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      if (interruptWhen && signalledAt === 0 && interruptWhen(stdout)) {
        signalledAt = performance.now();
        child.kill("SIGINT");
      }
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on("error", reject);
    child.on("close", (code) =>
      resolve({
        code,
        stdout,
        stderr,
        afterSignalMs: signalledAt ? performance.now() - signalledAt : 0,
        pid: child.pid ?? 0,
      }),
    );
  });
}

/**
 * `main` in real processes (semantics §8, §9): signals, exit codes, and what reaches stderr. Real
 * time is unavoidable here, since signals and exit codes only exist between processes; budgets are
 * small, waits generous, and timing asserts loose enough for a slow, shared machine.
 */
import { main, suspend } from "@keel/core";
import { describe, expect, it, vi } from "vitest";
import { CHILD_TEST_TIMEOUT_MS, startChild } from "./support/child.js";

vi.setConfig({ testTimeout: CHILD_TEST_TIMEOUT_MS });

const fixture = new URL("./fixtures/main-process.ts", import.meta.url);
const startFixture = (...args: string[]) => startChild(fixture, ...args);

describe("main in a real process", () => {
  it("a root that completes resolves main, removes its signal handlers and exits 0", async () => {
    const child = startFixture("complete");

    const exit = await child.exited;

    expect(exit.code).toBe(0);
    expect(child.stdoutLines()).toEqual(["ready", "work done", "main resolved; SIGINT listeners left: 0"]);
    expect(child.stderr()).toBe("");
  });

  it("SIGTERM cancels the root, lets async cleanup finish, then exits 143", async () => {
    const child = startFixture("cleanup", "3000");
    await child.waitForLine("ready");

    child.process.kill("SIGTERM");
    const exit = await child.exited;

    expect(exit.code).toBe(143);
    // The cleanup ran to its end before the exit, and main never resolved.
    expect(child.stdoutLines()).toEqual(["ready", "cleanup start", "cleanup done"]);
    expect(child.stderr()).toContain("SIGTERM received; shutting down (budget 3000 ms");
  });

  it("SIGINT cancels the root, lets async cleanup finish, then exits 130", async () => {
    const child = startFixture("cleanup", "3000");
    await child.waitForLine("ready");

    child.process.kill("SIGINT");
    const exit = await child.exited;

    expect(exit.code).toBe(130);
    expect(child.stdoutLines()).toEqual(["ready", "cleanup start", "cleanup done"]);
  });

  it("a cleanup that hangs past shutdownBudgetMs ends the process with code 1 and prints the tree", async () => {
    const child = startFixture("hang", "300");
    await child.waitForLine("ready");

    const signalledAt = performance.now();
    child.process.kill("SIGTERM");
    const exit = await child.exited;

    expect(exit.code).toBe(1);
    // Never before the budget; and well before the 5000 ms cleanup budget that would cut it.
    const elapsedMs = exit.at - signalledAt;
    expect(elapsedMs).toBeGreaterThanOrEqual(250);
    expect(elapsedMs).toBeLessThan(4000);
    expect(child.stdoutLines()).toEqual(["ready", "cleanup start"]);
    const stderr = child.stderr();
    expect(stderr).toContain("shutdown exceeded its budget of 300 ms; still running:");
    // The tree names the task that hangs and what it waits on.
    expect(stderr).toMatch(/^ {2}worker#\d+ cancelling .*waiting on sleep\(60000\)/m);
    expect(stderr).toMatch(/^server#\d+ cancelling/m);
  });

  it("a second signal during cleanup exits at once with that signal's code and prints the tree", async () => {
    const child = startFixture("hang", "20000");
    await child.waitForLine("ready");
    child.process.kill("SIGINT");
    await child.waitForLine("cleanup start");

    const secondAt = performance.now();
    child.process.kill("SIGTERM");
    const exit = await child.exited;

    expect(exit.code).toBe(143);
    // Far sooner than the 20 s shutdown budget.
    expect(exit.at - secondAt).toBeLessThan(4000);
    const stderr = child.stderr();
    expect(stderr).toContain("SIGINT received; shutting down (budget 20000 ms");
    expect(stderr).toContain("SIGTERM again during shutdown; exiting now. Still running:");
    expect(stderr).toMatch(/^ {2}worker#\d+ cancelling .*waiting on sleep\(60000\)/m);
    expect(child.stdoutLines()).toEqual(["ready", "cleanup start"]);
  });

  it("with shutdownBudgetMs: Infinity, nested shields in a cleanup end within the outer limit plus one budget", async () => {
    const child = startFixture("nested-shields", "Infinity");
    await child.waitForLine("ready");

    const signalledAt = performance.now();
    child.process.kill("SIGINT");
    const exit = await child.exited;

    expect(exit.code).toBe(130);
    // About 1200 ms (900 + 300); the inner shield's own 1800 ms limit would make it 2100 or more.
    const elapsedMs = exit.at - signalledAt;
    expect(elapsedMs).toBeGreaterThanOrEqual(1100);
    expect(elapsedMs).toBeLessThan(1800);
    expect(child.stderr()).toContain("shutting down (no budget");
  });

  it("a root that throws prints the error with its stack and cause, and exits 1", async () => {
    const child = startFixture("throw");

    const exit = await child.exited;

    expect(exit.code).toBe(1);
    const stderr = child.stderr();
    expect(stderr).toMatch(/keel: app#\d+ failed:\nError: boom: the root failed\n\s+at app /);
    expect(stderr).toContain("caused by: Error: the config file is missing");
    expect(child.stdoutLines()).toEqual(["ready"]);
  });

  it("a root that throws a plain object prints it readably, not as [object Object]", async () => {
    const child = startFixture("throw-object");

    const exit = await child.exited;

    expect(exit.code).toBe(1);
    expect(child.stderr()).toMatch(/keel: app#\d+ failed:\n\{"status":503,"reason":"upstream down"\}\n/);
    expect(child.stderr()).not.toContain("[object Object]");
  });

  it("a cleanup that throws during shutdown makes the process fail with code 1, the error printed", async () => {
    const child = startFixture("cleanup-fails", "3000");
    await child.waitForLine("ready");

    child.process.kill("SIGTERM");
    const exit = await child.exited;

    // An error beats a cancellation (semantics §2), so the shutdown is a failure, not a 143.
    expect(exit.code).toBe(1);
    expect(child.stderr()).toContain("Error: flush failed: disk full");
    expect(child.stdoutLines()).toEqual(["ready", "cleanup start"]);
  });

  it("SIGUSR2 prints the live task tree and stops nothing", async () => {
    const child = startFixture("cleanup", "3000");
    await child.waitForLine("ready");

    child.process.kill("SIGUSR2");
    await child.waitForStderr("task tree (SIGUSR2):");
    await child.waitForStderr("waiting on suspend()");

    const stderr = child.stderr();
    expect(stderr).toMatch(/^server#\d+ running .*waiting on suspend\(\)/m);
    expect(stderr).toMatch(/^ {2}worker#\d+ running .*waiting on suspend\(\)/m);
    expect(child.hasExited).toBe(false);
    expect(child.stdoutLines()).toEqual(["ready"]);
    // Still serving: a shutdown afterwards goes as usual.
    child.process.kill("SIGTERM");
    expect((await child.exited).code).toBe(143);
    expect(child.stdoutLines()).toEqual(["ready", "cleanup start", "cleanup done"]);
  });
});

describe("two roots in one process (semantics §8)", () => {
  it("a second main while one runs is refused with KEEL_MAIN_RUNNING; after it completes, another may run", async () => {
    const child = startFixture("two-mains");

    const exit = await child.exited;

    expect(exit.code).toBe(0);
    // Refused at the call, before the first main's body has had its first turn.
    expect(child.stdoutLines()).toEqual([
      "second refused: KEEL_MAIN_RUNNING",
      "ready",
      "first done",
      "third ran",
    ]);
  });

  it("a failing main cancels a run() root beside it and exits 1 only after that root's finally completes", async () => {
    const child = startFixture("run-beside-main-fails", "3000");

    const exit = await child.exited;

    expect(exit.code).toBe(1);
    expect(child.stdoutLines()).toEqual([
      "worker ready",
      "ready",
      "worker cleanup start",
      "worker cleanup done",
    ]);
    expect(child.stderr()).toContain("Error: app failed");
  });

  it("SIGTERM shuts down a run() root beside main too, and the exit waits for its cleanup", async () => {
    const child = startFixture("run-beside-main-signal", "3000");
    await child.waitForLine("ready");

    child.process.kill("SIGTERM");
    const exit = await child.exited;

    expect(exit.code).toBe(143);
    expect(child.stdoutLines()).toEqual([
      "worker ready",
      "ready",
      "worker cleanup start",
      "worker cleanup done",
    ]);
  });

  it("a run() root whose cleanup hangs is bounded by the shutdown budget, and the tree printed names it", async () => {
    const child = startFixture("run-beside-main-hang", "300");
    await child.waitForLine("ready");

    child.process.kill("SIGTERM");
    const exit = await child.exited;

    expect(exit.code).toBe(1);
    expect(child.stdoutLines()).toEqual(["worker ready", "ready", "worker cleanup start"]);
    expect(child.stderr()).toContain("shutdown exceeded its budget of 300 ms; still running:");
    expect(child.stderr()).toMatch(/^worker#\d+ cancelling .*waiting on sleep\(60000\)/m);
  });
});

describe("main's options", () => {
  it("rejects bad options at the call, naming the option, before installing any handler", () => {
    const before = process.listenerCount("SIGINT");

    expect(() => main(suspend, { shutdownBudgetMs: -1 })).toThrow(RangeError);
    expect(() => main(suspend, { shutdownBudgetMs: -1 })).toThrow(/main\(op, \{ shutdownBudgetMs \}\)/);
    expect(() => main(suspend, { shutdownBudgetMs: Number.NaN })).toThrow(RangeError);
    expect(() => main(suspend, { cleanupBudgetMs: -5 })).toThrow(/main\(op, \{ cleanupBudgetMs \}\)/);
    expect(() => main(suspend, { cleanupBudgetMs: -5 })).toThrow(RangeError);
    expect(() => main(suspend, { cleanupBudgetMs: Infinity })).toThrow(
      /main\(op, \{ cleanupBudgetMs \}\).*finite/,
    );
    expect(() => main(suspend, { name: 42 as unknown as string })).toThrow(/main\(op, \{ name \}\)/);
    expect(() => main(suspend, { onEvent: "log" as unknown as () => void })).toThrow(TypeError);
    expect(() => main(42 as unknown as () => never)).toThrow(/main\(op\)/);

    expect(process.listenerCount("SIGINT")).toBe(before);
  });
});

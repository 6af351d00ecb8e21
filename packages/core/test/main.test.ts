/**
 * `main` in real processes (semantics §8, §9): signals, exit codes, and what reaches stderr. Real
 * time is unavoidable here, since signals and exit codes only exist between processes; budgets are
 * small, waits generous, and timing asserts loose enough for a slow, shared machine.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { main, suspend } from "@keel/core";
import { afterEach, describe, expect, it } from "vitest";

const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));
const fixture = fileURLToPath(new URL("./fixtures/main-process.ts", import.meta.url));
/** How long to wait for a line or an exit before failing the test with what the child printed. */
const WAIT_MS = 10_000;

interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** `performance.now()` when the child exited. */
  readonly at: number;
}

interface Child {
  readonly process: ChildProcess;
  stdoutLines(): string[];
  stderr(): string;
  /** Resolves when stdout has a line equal to `line`; rejects if the child exits first. */
  waitForLine(line: string): Promise<void>;
  /** Resolves when stderr contains `text`; rejects if the child exits first. */
  waitForStderr(text: string): Promise<void>;
  readonly exited: Promise<Exit>;
  /** Whether the child has exited by now. */
  readonly hasExited: boolean;
}

const children: ChildProcess[] = [];

afterEach(() => {
  // A failed test must not leave its child running.
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

function startFixture(...args: string[]): Child {
  const proc = spawn(process.execPath, ["--import", "tsx", "--conditions=source", fixture, ...args], {
    cwd: repoRoot,
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(proc);
  let out = "";
  let err = "";
  let exit: Exit | null = null;
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const w of [...waiters]) w();
  };
  proc.stdout!.setEncoding("utf8").on("data", (d: string) => {
    out += d;
    wake();
  });
  proc.stderr!.setEncoding("utf8").on("data", (d: string) => {
    err += d;
    wake();
  });
  const exited = new Promise<Exit>((resolve) => {
    proc.on("close", (code, signal) => {
      exit = { code, signal, at: performance.now() };
      resolve(exit);
      wake();
    });
  });
  const waitFor = (what: string, done: () => boolean) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => finish(new Error(`timed out waiting for ${what}`)), WAIT_MS);
      const check = () => {
        if (done()) finish(null);
        else if (exit) finish(new Error(`the child exited (code ${exit.code}) before ${what}`));
      };
      const finish = (e: Error | null) => {
        clearTimeout(timer);
        waiters.delete(check);
        if (e) reject(new Error(`${e.message}\nstdout:\n${out}\nstderr:\n${err}`));
        else resolve();
      };
      waiters.add(check);
      check();
    });
  const lines = () => out.split("\n").filter((l) => l.length > 0);
  return {
    process: proc,
    stdoutLines: lines,
    stderr: () => err,
    waitForLine: (line) => waitFor(`the line ${JSON.stringify(line)}`, () => lines().includes(line)),
    waitForStderr: (text) => waitFor(`${JSON.stringify(text)} on stderr`, () => err.includes(text)),
    exited,
    get hasExited() {
      return exit !== null;
    },
  };
}

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

describe("main's options", () => {
  it("rejects bad options at the call, naming the option, before installing any handler", () => {
    const before = process.listenerCount("SIGINT");

    expect(() => main(suspend, { shutdownBudgetMs: -1 })).toThrow(RangeError);
    expect(() => main(suspend, { shutdownBudgetMs: -1 })).toThrow(/main\(op, \{ shutdownBudgetMs \}\)/);
    expect(() => main(suspend, { shutdownBudgetMs: Number.NaN })).toThrow(RangeError);
    expect(() => main(suspend, { cleanupBudgetMs: -5 })).toThrow(/main\(op, \{ cleanupBudgetMs \}\)/);
    expect(() => main(suspend, { cleanupBudgetMs: -5 })).toThrow(RangeError);
    expect(() => main(suspend, { name: 42 as unknown as string })).toThrow(/main\(op, \{ name \}\)/);
    expect(() => main(suspend, { onEvent: "log" as unknown as () => void })).toThrow(TypeError);
    expect(() => main(42 as unknown as () => never)).toThrow(/main\(op\)/);

    expect(process.listenerCount("SIGINT")).toBe(before);
  });
});

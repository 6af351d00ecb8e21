/**
 * A child Node process running a TypeScript fixture (through tsx, on the workspace sources), for
 * tests of what only exists between processes: signals, exit codes, what reaches stderr. Waits are
 * for lines and exits, never for delays, and generous, for a slow shared machine.
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterEach } from "vitest";

const repoRoot = fileURLToPath(new URL("../../../../", import.meta.url));
/**
 * How long to wait for a line before failing the test with what the child printed: a hang guard,
 * not a timing check (starting tsx alone takes seconds on a busy machine). Test files that start
 * children raise their test timeout above it (see {@link CHILD_TEST_TIMEOUT_MS}).
 */
const WAIT_MS = 45_000;

/** The test timeout for a test that starts a child process and waits for it. */
export const CHILD_TEST_TIMEOUT_MS = 60_000;

export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** `performance.now()` when the child exited. */
  readonly at: number;
}

export interface Child {
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

/** Starts `node --import tsx --conditions=source <fixture> ...args`; `fixture` is a URL or a path. */
export function startChild(fixture: URL | string, ...args: string[]): Child {
  return startChildWith({}, fixture, ...args);
}

/** What {@link startChildWith} adds to a child's command line and environment. */
export interface ChildOptions {
  /** Modules for `--import` after tsx's (module hooks: registered last, they resolve first). */
  readonly imports?: readonly (URL | string)[];
  /** Variables added to the child's environment (over this process's). */
  readonly env?: Readonly<Record<string, string>>;
}

/** {@link startChild} with more `--import`s and environment variables. */
export function startChildWith(options: ChildOptions, fixture: URL | string, ...args: string[]): Child {
  const script = fixture instanceof URL ? fileURLToPath(fixture) : fixture;
  const imports = (options.imports ?? []).flatMap((m) => ["--import", m instanceof URL ? m.href : m]);
  const proc = spawn(
    process.execPath,
    ["--import", "tsx", ...imports, "--conditions=source", script, ...args],
    {
      cwd: repoRoot,
      env: { ...process.env, ...options.env },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
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

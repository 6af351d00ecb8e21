/**
 * Crash and replay with real process death (issue 25): a child process runs a workflow on
 * PostgreSQL or on the embedded SQLite store and is SIGKILLed inside step 2; a second process
 * resumes it. And two processes racing on one execution: never both at once.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { CHILD_TEST_TIMEOUT_MS, startChildWith } from "../../core/test/support/child.js";
import { dropSchema, POSTGRES_URL, postgresUp, randomSchema } from "./postgres.js";

const dir = mkdtempSync(join(tmpdir(), "keel-wf-crash-"));
const schema = randomSchema();
const pool = new pg.Pool({ connectionString: POSTGRES_URL });
afterAll(async () => {
  if (postgresUp) await dropSchema(pool, schema);
  await pool.end();
  rmSync(dir, { recursive: true, force: true });
});

const stores = [
  ["PostgreSQL", postgresUp, { WF_STORE: "postgres", WF_URL: POSTGRES_URL, WF_SCHEMA: schema }],
  ["SQLite", true, { WF_STORE: "sqlite", WF_PATH: join(dir, "wf.db") }],
] as const;

interface Line {
  readonly pid: string;
  readonly what: "start" | "end";
  readonly key: string;
}
function readLog(file: string): Line[] {
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.length > 0)
    .map((l) => {
      const [pid, what, key] = l.split(" ");
      return { pid: pid!, what: what as Line["what"], key: key! };
    });
}

describe.each(stores)("on %s", (name, up, storeEnv) => {
  it.skipIf(!up)(
    "a process SIGKILLed inside step 2: a second resumes it; step 1 and step 3 ran once in all, the same result",
    async () => {
      const logFile = join(dir, `${name}-kill.log`);
      const env = { ...storeEnv, WF_LOG: logFile, WF_LEASE_MS: "1500", WF_STEP_MS: "60000" };
      const a = startChildWith(
        { env: { ...env, WF_START: "k1" } },
        new URL("./fixtures/workflow-process.ts", import.meta.url),
      );
      // Inside step 2 (it sleeps a minute): its start is logged.
      await waitFor(() => readLogSafe(logFile).some((l) => l.what === "start" && l.key === "k1/two#1"));
      a.process.kill("SIGKILL");
      expect((await a.exited).signal).toBe("SIGKILL");
      const b = startChildWith(
        { env: { ...env, WF_STEP_MS: "10", WF_AWAIT: "k1" } },
        new URL("./fixtures/workflow-process.ts", import.meta.url),
      );
      await b.waitForLine("done");
      expect(b.stdoutLines()).toContain('result k1 "2!"');
      const lines = readLog(logFile);
      const starts = (key: string) => lines.filter((l) => l.what === "start" && l.key === key);
      expect(starts("k1/one#1")).toHaveLength(1);
      expect(starts("k1/two#1").map((l) => l.pid)).toEqual([String(a.process.pid), String(b.process.pid)]);
      expect(starts("k1/three#1")).toHaveLength(1);
      expect(lines.filter((l) => l.what === "end" && l.key === "k1/two#1").map((l) => l.pid)).toEqual([
        String(b.process.pid),
      ]);
    },
    CHILD_TEST_TIMEOUT_MS * 2,
  );

  it.skipIf(!up)(
    "two processes racing on the same executions: each step runs once, never in both at once",
    async () => {
      const logFile = join(dir, `${name}-race.log`);
      const ids = Array.from({ length: 12 }, (_, i) => `r${i}`).join(",");
      const env = {
        ...storeEnv,
        WF_LOG: logFile,
        WF_STEP_MS: "30",
        // Both start together: the one that creates an execution runs it at once when it has a
        // slot, so a process up first would otherwise take them all.
        WF_GO: `${logFile}.go`,
        WF_START: ids,
        WF_AWAIT: ids,
        WF_CONCURRENCY: "4",
      };
      const script = new URL("./fixtures/workflow-process.ts", import.meta.url);
      const [a, b] = [startChildWith({ env }, script), startChildWith({ env }, script)];
      await Promise.all([a.waitForLine("up"), b.waitForLine("up")]);
      writeFileSync(env.WF_GO, "");
      await Promise.all([a.waitForLine("done"), b.waitForLine("done")]);
      const lines = readLog(logFile);
      // Both processes ran (on PostgreSQL both take some; SQLite's lock is not fair, so one may take all).
      if (name === "PostgreSQL") expect(new Set(lines.map((l) => l.pid)).size).toBe(2);
      for (const key of new Set(lines.map((l) => l.key))) {
        const own = lines.filter((l) => l.key === key);
        expect(
          own.map((l) => l.what),
          key,
        ).toEqual(["start", "end"]);
      }
      // Never both at once on one execution: its steps' start/end lines never interleave across pids.
      for (const id of ids.split(",")) {
        const own = lines.filter((l) => l.key.startsWith(`${id}/`));
        for (let i = 0; i + 1 < own.length; i += 2) expect(own[i]!.pid, id).toBe(own[i + 1]!.pid);
      }
      expect(a.stdoutLines().filter((l) => l.startsWith("result r0 "))).toEqual(
        b.stdoutLines().filter((l) => l.startsWith("result r0 ")),
      );
    },
    CHILD_TEST_TIMEOUT_MS * 2,
  );
});

function readLogSafe(file: string): Line[] {
  try {
    return readLog(file);
  } catch {
    return [];
  }
}

async function waitFor(done: () => boolean, ms = 45_000): Promise<void> {
  const until = performance.now() + ms;
  while (!done()) {
    if (performance.now() > until) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 50));
  }
}

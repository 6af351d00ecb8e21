/** keel-inspect <pid> lists a workflow engine's executions by status, the parked ones included. */
import { describe, expect, it } from "vitest";
import { CHILD_TEST_TIMEOUT_MS, startChild } from "../../core/test/support/child.js";

const cli = new URL("../../core/src/process/inspect-cli.ts", import.meta.url);

describe("keel-inspect and a workflow engine", () => {
  it(
    "shows the running execution's step in the tree, and the engine's section lists executions by status",
    async () => {
      const child = startChild(new URL("./fixtures/inspect-process.ts", import.meta.url));
      await child.waitForLine("ready");
      const text = startChild(cli, String(child.process.pid));
      expect((await text.exited).code).toBe(0);
      const out = text.stdoutLines().join("\n");
      expect(out).toMatch(/step crunch#1.*waiting on sleep\(600000\)/);
      expect(out).toContain("== workflow engine inspected ==");
      expect(out).toContain("running here: b-1");
      expect(out).toContain("in the store: running 1, pending 0, sleeping 1, waiting 0");
      expect(out).toMatch(/ {2}sleeping +n-1 \(napper@1\) waiting on sleep until /);
      const json = startChild(cli, String(child.process.pid), "--json");
      expect((await json.exited).code).toBe(0);
      const parts = JSON.parse(json.stdoutLines().join("\n")) as {
        section?: string;
        data?: { byStatus: Record<string, { id: string }[]> };
      }[];
      const section = parts.find((p) => p.section === "workflow engine inspected");
      expect(section?.data?.byStatus.sleeping?.map((e) => e.id)).toEqual(["n-1"]);
      child.process.kill("SIGTERM");
      expect((await child.exited).code).toBe(143);
    },
    CHILD_TEST_TIMEOUT_MS,
  );
});

/**
 * Diagnosis in real processes: `keel-inspect` asking a running `main` for its tree over a local
 * socket, a step that blocks the event loop reported with its task, and `main`'s lines through a
 * logger. Real time and real processes; waits are generous and assert no tight timing.
 */
import { existsSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import type { TaskSnapshot } from "@keel/core";
import { describe, expect, it } from "vitest";
import { startChild } from "./support/child.js";

const fixture = new URL("./fixtures/diagnosis-process.ts", import.meta.url);
const cli = new URL("../src/process/inspect-cli.ts", import.meta.url);

describe("keel-inspect", () => {
  it("prints every live root's tree of a process started with main(op, { inspect: true }), as text and as JSON", async () => {
    const child = startChild(fixture, "inspect");
    await child.waitForLine("ready");
    const socket = `${tmpdir()}/keel-inspect-${child.process.pid}.sock`;
    expect(statSync(socket).mode & 0o777).toBe(0o600);

    const text = startChild(cli, String(child.process.pid));
    expect((await text.exited).code).toBe(0);
    const out = text.stdoutLines().join("\n");
    expect(out).toMatch(/^server#\d+ running/m);
    expect(out).toMatch(/^ {2}holder#\d+ running .*waiting on sleep\(60000\)/m);
    expect(out).toMatch(/^ {2}query#\d+ running .*waiting on semaphore db: 1 waiting .*1st in the queue/m);
    // Every live root: the run() root beside main's, after it.
    expect(out).toMatch(/^sidecar#\d+ running .*waiting on sleep\(60000\)/m);
    expect(out.indexOf("sidecar#")).toBeGreaterThan(out.indexOf("server#"));

    const json = startChild(cli, String(child.process.pid), "--json");
    expect((await json.exited).code).toBe(0);
    const roots = JSON.parse(json.stdoutLines().join("\n")) as TaskSnapshot[];
    expect(roots.map((r) => r.name)).toEqual(["server", "sidecar"]);
    expect(roots[1]!.waitingOn).toBe("sleep(60000)");
    const tree = roots[0]!;
    expect(tree.children.find((c) => c.name === "query")?.waitDetail).toEqual({
      kind: "semaphore",
      name: "db",
      position: 1,
      waiting: 1,
    });

    child.process.kill("SIGTERM");
    expect((await child.exited).code).toBe(143);
    expect(existsSync(socket)).toBe(false);
  });

  it("exits 2 and says why when no process listens", async () => {
    const cliChild = startChild(cli, "999999999");
    expect((await cliChild.exited).code).toBe(2);
    expect(cliChild.stderr()).toContain("no Keel process listens");
  });
});

describe("main(op, { blockedStepMs })", () => {
  it("reports a step that held the event loop past the threshold, naming the task", async () => {
    const child = startChild(fixture, "blocked");
    expect((await child.exited).code).toBe(0);
    expect(child.stdoutLines()).toContain("done");
    expect(child.stderr()).toMatch(
      /keel: task:blocked at app#\d+\/crunch#\d+ .*a step ran \d+ ms without yielding, blocking the event loop \(threshold 100 ms\)/,
    );
    // Only the crunching step: the others yield at once.
    expect(child.stderr().match(/task:blocked/g)).toHaveLength(1);
  });
});

describe("main(op, { logger })", () => {
  it("hands main's own lines to the logger: the SIGUSR2 tree under fields.tree, the signal", async () => {
    const child = startChild(fixture, "logger");
    await child.waitForLine("ready");
    child.process.kill("SIGUSR2");
    const seen = () => child.stdoutLines().some((l) => l.includes("SIGUSR2"));
    while (!seen() && !child.hasExited) await new Promise((r) => setTimeout(r, 20));
    child.process.kill("SIGTERM");
    expect((await child.exited).code).toBe(143);
    const records = child
      .stdoutLines()
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { level: string; message: string; fields: { tree?: string } });
    const dump = records.find((r) => r.message.includes("SIGUSR2"))!;
    expect(dump.level).toBe("info");
    expect(dump.fields.tree).toMatch(/holder#\d+ running .*sleep\(60000\)/);
    expect(records.some((r) => r.message.startsWith("keel: SIGTERM received"))).toBe(true);
    expect(child.stderr()).toBe("");
  });
});

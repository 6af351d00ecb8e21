/**
 * A root task that fails while nobody joins it is reported as Node reports an unhandled promise
 * rejection; joining it in any form (then, catch, finally, await, yield*) before it settles handles
 * it, and a cancelled root is never reported. Real processes: a test runner would report the
 * rejection as its own failure.
 */
import { describe, expect, it, vi } from "vitest";
import { CHILD_TEST_TIMEOUT_MS, startChild } from "./support/child.js";

vi.setConfig({ testTimeout: CHILD_TEST_TIMEOUT_MS });

const fixture = new URL("./fixtures/root-process.ts", import.meta.url);

async function runScenario(scenario: string) {
  const child = startChild(fixture, scenario);
  const exit = await child.exited;
  return { code: exit.code, stdout: child.stdoutLines(), stderr: child.stderr() };
}

describe("a failed root task that nobody joins", () => {
  it("is reported as an unhandled rejection: Node prints the error and exits 1", async () => {
    const { code, stderr } = await runScenario("unjoined-failure");
    expect(code).toBe(1);
    expect(stderr).toContain("Error: nobody joined me");
    expect(stderr).toMatch(/at lost /);
  });

  it("reaches process 'unhandledRejection' with the task's error, and a later catch marks it handled", async () => {
    const { code, stdout } = await runScenario("reported-as-unhandled-rejection");
    expect(code).toBe(0);
    expect(stdout).toEqual([
      "unhandledRejection: nobody joined me",
      "a promise: true",
      "handled after the report",
      "rejectionHandled",
    ]);
  });
});

describe("a failed root task that is joined is not reported", () => {
  it.each([
    ["caught", ["caught: nobody joined me"]],
    ["finally", ["finally ran", "then: nobody joined me"]],
    ["awaited-later", ["started", "awaited: failed at 100"]],
    ["joined-by-yield", ["outer caught: nobody joined me"]],
  ])("%s", async (scenario, lines) => {
    const { code, stdout, stderr } = await runScenario(scenario);
    expect(stderr).toBe("");
    expect(stdout).toEqual(lines);
    expect(code).toBe(0);
  });

  it("a root that ends cancelled is never reported, joined or not", async () => {
    const { code, stdout, stderr } = await runScenario("cancelled-unjoined");
    expect(stderr).toBe("");
    expect(stdout).toEqual(["done"]);
    expect(code).toBe(0);
  });
});

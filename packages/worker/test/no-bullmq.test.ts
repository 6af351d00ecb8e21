/**
 * A user of the embedded queue never needs bullmq: a child process in which `bullmq` and `ioredis`
 * cannot be found (fixtures/unresolvable.mjs, for `import` and `require` alike) imports
 * `@keel/worker` and runs a job on `createMemoryQueue` with `useWorker`. The same setup is shown to
 * bite: importing `@keel/worker/bullmq` there fails, naming bullmq.
 */
import { describe, expect, it } from "vitest";
import { CHILD_TEST_TIMEOUT_MS, startChildWith } from "../../core/test/support/child.js";

const setup = {
  imports: [new URL("./fixtures/unresolvable.mjs", import.meta.url)],
  env: { KEEL_UNRESOLVABLE: "bullmq,ioredis" },
};
const fixture = new URL("./fixtures/no-bullmq.ts", import.meta.url);

describe("without bullmq and ioredis installed", () => {
  it(
    "@keel/worker runs a job on the embedded queue",
    async () => {
      const child = startChildWith(setup, fixture, "memory");
      const exit = await child.exited;
      expect({ stdout: child.stdoutLines(), stderr: child.stderr() }).toEqual({ stdout: ["ok"], stderr: "" });
      expect(exit.code).toBe(0);
    },
    CHILD_TEST_TIMEOUT_MS,
  );

  it(
    "@keel/worker/bullmq cannot be imported (the setup does hide bullmq), and the error names bullmq",
    async () => {
      const child = startChildWith(setup, fixture, "bullmq");
      const exit = await child.exited;
      const lines = child.stdoutLines();
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^failed ERR_MODULE_NOT_FOUND: Cannot find package 'bullmq' imported from /);
      expect(exit.code).toBe(0);
    },
    CHILD_TEST_TIMEOUT_MS,
  );
});

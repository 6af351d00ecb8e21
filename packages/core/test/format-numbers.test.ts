/**
 * Numbers people read are rounded (issue 24, item 8): on the real clock, whose readings are
 * fractional (`1796519528873.0452`, `107.455322265625`), the task tree, warnings, log records and
 * `keel-inspect`'s answers show durations and instants to at most one decimal, and a log record's
 * `deadline` as an ISO date. Real clock, real socket: the fractions come from where they come in
 * production (`performance.now()`), not from a virtual clock's whole numbers.
 */
import { connect } from "node:net";
import { tmpdir } from "node:os";
import {
  exponential,
  formatTaskTree,
  isTimeoutError,
  type LogRecord,
  now,
  retry,
  run,
  sleep,
  snapshot,
  spawn,
  suspend,
  timeout,
  timeoutAt,
} from "@keel/core";
import { describe, expect, it } from "vitest";
import type { TaskImpl } from "../src/kernel/task.js";
import { inspectSocketPath, openInspectSocket } from "../src/process/inspect-server.js";

/** Every number in `text` written with two decimals or more (`107.45`), which people should not read. */
function overPrecise(text: string): string[] {
  return [...text.matchAll(/\d+\.\d{2,}/g)].map((m) => m[0]);
}

/** Lets real time pass (the tasks' sleeps are short; the snapshot is taken while they wait). */
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A tree whose waits have fractional numbers: a sleep of a fractional duration, a `timeoutAt` at a
 * fractional instant (a real clock's `now() + …`), a retry whose jittered backoff is fractional.
 */
function* fractional() {
  const at = (yield* now()) + 60_000.123_456;
  yield* spawn(function* napper() {
    yield* sleep(30_000.987_654);
  });
  yield* spawn(function* bounded() {
    yield* timeoutAt(at, suspend);
  });
  yield* spawn(function* flaky() {
    yield* retry(
      function* call() {
        yield* sleep(1);
        throw Object.assign(new Error("busy"), { status: 503 });
      },
      { attempts: 3, backoff: exponential({ baseMs: 20_000.5, jitter: "full" }) },
    );
  });
  yield* suspend();
}

describe("numbers people read have at most one decimal (the real clock)", () => {
  it("the task tree: sleeps, timeoutAt labels, deadlines left, ages and waits", async () => {
    const root = run(fractional, { name: "service" });
    await pause(30);
    const tree = formatTaskTree(snapshot(root));
    await root.cancel();
    // The shape, numbers masked: every line is there, each with its numbers.
    const masked = tree.replace(/\d+(\.\d+)?/g, "N").split("\n");
    expect(masked.slice(0, 3)).toEqual([
      "service#N running Nms, waiting on suspend() for Nms",
      "  napper#N running Nms, waiting on sleep(N) for Nms, wakes in Ns",
      "  bounded#N running Nms, deadline in Ns, waiting on suspend() for Nms",
    ]);
    expect(tree).toContain("waiting on sleep(30001)"); // 30000.987654, to a tenth
    expect(overPrecise(tree)).toEqual([]);
  });

  it("a TimeoutError's message, and the warning and log record of a timeout", async () => {
    const records: LogRecord[] = [];
    const outcome = await run(
      function* handler() {
        try {
          yield* timeoutAt((yield* now()) + 5.432_1, sleep(50));
          return "finished";
        } catch (e) {
          if (!isTimeoutError(e)) throw e;
          return e.message;
        }
      },
      { logger: (r) => records.push(r), logEvents: "debug" },
    );
    expect(outcome).toMatch(/^timeoutAt\(\d+(\.\d)?\): timed out after \d+(\.\d)? ms$/);
    const fired = records.find((r) => r.event === "timeout:fire");
    expect(fired).toBeDefined();
    // The instant as a date, like the record's time; durations to a tenth.
    expect(fired!.fields.deadline).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(String(fired!.fields.timeoutMs)).toMatch(/^\d+(\.\d)?$/);
    const started = records.find((r) => r.event === "timeout:start");
    expect(String(started!.fields.deadlineLeftMs)).toMatch(/^\d+(\.\d)?$/);
    for (const r of records) {
      const numbers = Object.entries(r.fields)
        .filter(([, v]) => typeof v === "number")
        .map(([k, v]) => `${k}=${v}`);
      expect(overPrecise(`${r.message} ${numbers.join(" ")}`), r.message).toEqual([]);
    }
  });

  it("an HTTP-free timeout under a fractional deadline: the cancel request's message", async () => {
    const messages: string[] = [];
    await run(
      function* handler() {
        const at = (yield* now()) + 3.333_33;
        try {
          yield* timeoutAt(at, () => timeout(1000, sleep(20)));
        } catch (e) {
          if (!isTimeoutError(e)) throw e;
        }
      },
      {
        onEvent: (e) => {
          if (e.type === "cancel:request" && e.reason.message) messages.push(e.reason.message);
        },
      },
    );
    expect(messages.length).toBeGreaterThan(0);
    for (const m of messages) expect(overPrecise(m), m).toEqual([]);
  });

  it("keel-inspect's answers, text and JSON", async () => {
    const root = run(fractional, { name: "service" });
    await pause(30);
    const close = await openInspectSocket(root as unknown as TaskImpl<unknown>);
    const ask = (question: string) =>
      new Promise<string>((resolve, reject) => {
        let answer = "";
        const socket = connect(inspectSocketPath(tmpdir(), process.pid), () => socket.write(`${question}\n`));
        socket.setEncoding("utf8");
        socket.on("data", (chunk: string) => {
          answer += chunk;
        });
        socket.on("end", () => resolve(answer));
        socket.on("error", reject);
      });
    try {
      const [text, json] = [await ask("text"), await ask("json")];
      expect(text).toContain("service#");
      expect(overPrecise(text)).toEqual([]);
      const roots = JSON.parse(json) as {
        at: number;
        ageMs: number;
        children: { deadlineLeftMs: number | null }[];
      }[];
      expect(roots[0]!.children.some((c) => c.deadlineLeftMs !== null)).toBe(true);
      expect(overPrecise(json)).toEqual([]);
    } finally {
      close();
      await root.cancel();
    }
  });
});

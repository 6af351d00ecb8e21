/**
 * The logger hook: warnings (and events on request) as structured records, per run; the pino
 * adapter against real pino; nothing logged for errors that reached their caller.
 */
import { Writable } from "node:stream";
import {
  type KeelEvent,
  type LogRecord,
  pinoLogger,
  run,
  shield,
  sleep,
  spawn,
  suspend,
  timeout,
} from "@keel/core";
import { createHttpClient } from "@keel/core/http";
import { createFaultServer, createVirtualClock } from "@keel/testing";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

/** A cleanup that overruns its 100 ms budget: the `cleanup:overrun` warning. */
function* overrun() {
  const w = yield* spawn(function* worker() {
    try {
      yield* suspend();
    } finally {
      yield* shield(sleep(300));
    }
  });
  yield* sleep(50);
  yield* w.cancel();
}

let warn: ReturnType<typeof vi.spyOn>;
beforeEach(() => {
  warn = vi.spyOn(console, "warn").mockImplementation(() => {});
});
afterEach(() => warn.mockRestore());

describe("run(op, { logger })", () => {
  it("gets the warnings as records (level, message, path, ids, times), and console.warn gets nothing", async () => {
    const records: LogRecord[] = [];
    await run(overrun, {
      name: "app",
      clock: createVirtualClock(),
      cleanupBudgetMs: 100,
      logger: (r) => records.push(r),
    });
    expect(warn).not.toHaveBeenCalled();
    // The overrun, then the shield's limit (the budget) failing it while cancelled.
    expect(records.map((r) => r.event)).toEqual(["cleanup:overrun", "error:suppressed"]);
    const [r] = records;
    expect(r).toMatchObject({
      level: "warn",
      event: "cleanup:overrun",
      path: expect.stringMatching(/^app#\d+\/worker#\d+$/),
      taskId: expect.any(Number),
      sinceStartMs: 150,
      time: "1970-01-01T00:00:00.150Z",
      fields: { budgetMs: 100, waitingOn: expect.stringContaining("shield") },
    });
    expect(r!.message).toMatch(/^keel: cleanup:overrun at app#\d+\/worker#\d+: cleanup exceeded 100 ms/);
  });

  it("without a logger, the warning stays on console.warn, readable", async () => {
    await run(overrun, { name: "app", clock: createVirtualClock(), cleanupBudgetMs: 100 });
    expect(warn).toHaveBeenCalledTimes(2);
    expect(String(warn.mock.calls[0]![0])).toMatch(
      /keel: cleanup:overrun at app#\d+\/worker#\d+ \(150 ms after/,
    );
  });

  it('logEvents: "info" adds the notable events, true adds every one, each at its level; onEvent still gets all', async () => {
    const op = function* () {
      try {
        yield* timeout(10, sleep(100));
      } catch {}
    };
    const info: LogRecord[] = [];
    await run(op, { clock: createVirtualClock(), logger: (r) => info.push(r), logEvents: "info" });
    // The timeout's own cancellation request says nothing `timeout:fire` does not: it is debug.
    expect(info.map((r) => r.event).sort()).toEqual(["timeout:fire"]);
    expect(info.every((r) => r.level === "info")).toBe(true);

    const all: LogRecord[] = [];
    const events: KeelEvent[] = [];
    await run(op, {
      clock: createVirtualClock(),
      logger: (r) => all.push(r),
      logEvents: true,
      onEvent: (e) => events.push(e),
    });
    expect(all.map((r) => r.event)).toEqual(events.map((e) => e.type));
    expect(all.find((r) => r.event === "task:start")!.level).toBe("debug");
  });

  it("logs nothing for an error that reached its caller, nor for a joined task's cancellation", async () => {
    const records: LogRecord[] = [];
    const logger = (r: LogRecord) => records.push(r);
    const failed = run(
      function* () {
        const child = yield* spawn(function* child() {
          yield* sleep(5);
          throw new Error("child failed");
        });
        yield* child;
      },
      { clock: createVirtualClock(), logger },
    );
    await expect(failed).rejects.toThrow("child failed");
    // A joiner cancelled while the task it joins is cancelled: the TaskCancelledError it was handed
    // is replaced by its own cancellation, and that drops no error.
    const clock = createVirtualClock({ autojump: false });
    const root = run(
      function* server() {
        const child = yield* spawn(suspend);
        yield* spawn(function* joiner() {
          yield* child;
        });
        yield* suspend();
      },
      { clock, logger },
    );
    await new Promise((resolve) => setImmediate(resolve));
    await root.cancel();
    expect(records).toEqual([]);
    expect(warn).not.toHaveBeenCalled();
  });

  it("rejects a logger that is not a function and a bad logEvents, naming the option", () => {
    expect(() => run(suspend, { logger: {} as never })).toThrow(/run\(op, \{ logger \}\).*function/);
    expect(() => run(suspend, { logEvents: "warn" as never })).toThrow(/run\(op, \{ logEvents \}\)/);
    expect(() => pinoLogger({} as never)).toThrow(/pinoLogger\(pino\).*warn, info and debug/);
  });
});

describe("pinoLogger", () => {
  function memoryPino() {
    const lines: Record<string, unknown>[] = [];
    const stream = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split("\n")) if (line) lines.push(JSON.parse(line));
        done();
      },
    });
    return { log: pino({ level: "debug" }, stream), lines };
  }

  it("writes each record at its level with the task path and the event's fields", async () => {
    const { log, lines } = memoryPino();
    await run(overrun, {
      name: "app",
      clock: createVirtualClock(),
      cleanupBudgetMs: 100,
      logger: pinoLogger(log),
      logEvents: "debug",
    });
    const overran = lines.find((l) => l.keel === "cleanup:overrun")!;
    expect(overran).toMatchObject({
      level: 40,
      path: expect.stringMatching(/^app#\d+\/worker#\d+$/),
      sinceStartMs: 150,
      budgetMs: 100,
      msg: expect.stringMatching(/^keel: cleanup:overrun at app#\d+\/worker#\d+: cleanup exceeded 100 ms/),
    });
    expect(lines.find((l) => l.keel === "cancel:request")).toMatchObject({
      level: 20,
      reason: { kind: "cancel" },
    });
    expect(warn).not.toHaveBeenCalled();
  });

  it("puts an error under err, so pino's serializer prints its stack", async () => {
    const { log, lines } = memoryPino();
    await run(
      function* () {
        try {
          yield* timeout(10, function* () {
            try {
              yield* suspend();
            } finally {
              // An error beats a cancellation: the TimeoutError is attached to it, and reported.
              // biome-ignore lint/correctness/noUnsafeFinally: the case under test.
              throw new Error("flush failed");
            }
          });
        } catch {}
      },
      { clock: createVirtualClock(), logger: pinoLogger(log) },
    );
    const suppressed = lines.find((l) => l.keel === "error:suppressed") as {
      err?: { message?: string; stack?: string };
    };
    expect(suppressed?.err?.stack).toContain("TimeoutError");
  });
});

/** A client of a fresh fault server answering `/ok`. */
function* okClient() {
  const server = yield* createFaultServer(
    { "/ok": { status: 200, json: { ok: true } } },
    { connectHang: false },
  );
  return yield* createHttpClient({ baseUrl: server.url, retry: false });
}

describe("run(op, { warnNoDeadline })", () => {
  it("warns once per HTTP call made with no deadline of its caller's, and not under a timeout", async () => {
    const records: LogRecord[] = [];
    const outcome = await run(
      function* () {
        const client = yield* okClient();
        yield* client.getJson("/ok");
        yield* timeout(5000, client.getJson("/ok"));
        return "done";
      },
      { warnNoDeadline: true, logger: (r) => records.push(r) },
    );
    expect(outcome).toBe("done");
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({
      level: "warn",
      event: "deadline:missing",
      fields: { call: "http", label: "GET /ok" },
    });
  });

  it("is off by default", async () => {
    const events: KeelEvent[] = [];
    await run(
      function* () {
        const client = yield* okClient();
        yield* client.getJson("/ok");
      },
      { onEvent: (e) => events.push(e) },
    );
    expect(events.filter((e) => e.type === "deadline:missing")).toEqual([]);
  });
});

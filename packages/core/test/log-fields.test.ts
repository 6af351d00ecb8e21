/**
 * Log fields (issue 24 item 5): a task spawned with `logFields` puts them on every log record about
 * it or a task under it, whoever's step made the record (a `cancel:request` is made by the
 * canceller), and `logFields()` returns them in its steps, in the promise code they start (Node's
 * async context), and while Keel hands a record about it to a logger. Checked with real pino.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import {
  type KeelEvent,
  type LogRecord,
  logFields,
  pinoLogger,
  run,
  sleep,
  spawn,
  suspend,
  timeout,
  until,
  useScope,
} from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { errorAtInfo, levelOf } from "../src/observe/levels.js";

const tick = () => new Promise<void>((r) => setImmediate(r));

describe("records about a task carry its log fields", () => {
  it("its own, its children's, and those made by another task's step", async () => {
    const records: LogRecord[] = [];
    await run(
      function* () {
        const job = yield* spawn(
          function* job() {
            yield* spawn(function* child() {
              yield* suspend();
            });
            yield* suspend();
          },
          { name: "job", logFields: { queue: "mail", jobId: "m1" } },
        );
        yield* sleep(1);
        yield* job.cancel("stop"); // its cancel:request is made in this (the root's) step
      },
      { clock: createVirtualClock(), logger: (r) => records.push(r), logEvents: "debug" },
    );
    const about = records.filter((r) => /job#|child#/.test(r.path ?? ""));
    expect(about.map((r) => r.event)).toEqual(
      expect.arrayContaining(["task:start", "cancel:request", "task:settle"]),
    );
    for (const r of about) expect(r.fields).toMatchObject({ queue: "mail", jobId: "m1" });
    // The root is outside the job: its records carry nothing of it.
    const root = records.filter((r) => /^run#\d+$/.test(r.path ?? ""));
    expect(root.length).toBeGreaterThan(0);
    for (const r of root) expect(r.fields).not.toHaveProperty("jobId");
  });

  it("a child's fields go over its parent's; an event's field they hide keeps its value under its family's name", async () => {
    const records: LogRecord[] = [];
    await run(
      function* () {
        const outer = yield* spawn(
          function* () {
            const inner = yield* spawn(function* inner() {}, { logFields: { attempt: 2, reason: "x" } });
            yield* inner;
          },
          { logFields: { jobId: "a", attempt: 1 } },
        );
        yield* outer;
        const cut = yield* spawn(suspend, { name: "cut", logFields: { reason: "mine" } });
        yield* sleep(0);
        yield* cut.cancel();
      },
      { clock: createVirtualClock(), logger: (r) => records.push(r), logEvents: "debug" },
    );
    const inner = records.find((r) => r.event === "task:start" && r.path?.includes("inner#"));
    expect(inner?.fields).toMatchObject({ jobId: "a", attempt: 2, reason: "x" });
    const request = records.find((r) => r.event === "cancel:request" && r.path?.includes("cut#"));
    expect(request!.fields.reason).toBe("mine");
    expect((request!.fields.cancelReason as { kind: string }).kind).toBe("cancel");
  });

  it("a task spawned without fields makes records with the event's fields only", async () => {
    const records: LogRecord[] = [];
    await run(function* plain() {}, { logger: (r) => records.push(r), logEvents: "debug" });
    const start = records.find((r) => r.event === "task:start")!;
    expect(Object.keys(start.fields).sort()).toEqual(["deadlineLeftMs", "name", "parentId", "rootId"]);
  });
});

describe("logFields()", () => {
  it("in a step, in promise code after an await, from scope.spawn, and outside any task", async () => {
    const seen: Record<string, unknown> = {};
    await run(function* () {
      const scope = yield* useScope();
      const job = yield* spawn(
        function* () {
          seen.step = logFields();
          seen.promise = yield* until(
            (async () => {
              await tick();
              await new Promise((r) => setTimeout(r, 1));
              return logFields();
            })(),
          );
          seen.child = yield* yield* spawn(function* () {
            return logFields();
          });
        },
        { logFields: { jobId: "j1" } },
      );
      yield* job;
      let fromCallback: Promise<unknown> | null = null;
      setTimeout(() => {
        fromCallback = scope
          .spawn(
            function* () {
              yield* sleep(1);
              return yield* until(Promise.resolve().then(() => logFields()));
            },
            { logFields: { requestId: "r7" } },
          )
          .then((v) => v);
      }, 0);
      while (fromCallback === null) yield* sleep(1);
      seen.scope = yield* until(fromCallback);
      seen.root = logFields();
    });
    expect(seen).toEqual({
      step: { jobId: "j1" },
      promise: { jobId: "j1" },
      child: { jobId: "j1" },
      scope: { requestId: "r7" },
      root: {},
    });
    expect(logFields()).toEqual({});
  });

  it("concurrent tasks' promise code each read their own fields, beside the user's own storage", async () => {
    const store = new AsyncLocalStorage<string>();
    const wrong: string[] = [];
    await store.run("outer", () =>
      run(function* () {
        const tasks = [];
        for (let i = 0; i < 20; i++)
          tasks.push(
            yield* spawn(
              function* () {
                for (let k = 0; k < 3; k++) {
                  yield* sleep(i % 3);
                  const got = yield* until(
                    (async () => {
                      await tick();
                      return { fields: logFields(), mine: store.getStore() };
                    })(),
                  );
                  if (got.fields.jobId !== `j${i}` || got.mine !== "outer") wrong.push(JSON.stringify(got));
                }
              },
              { logFields: { jobId: `j${i}` } },
            ),
          );
        for (const t of tasks) yield* t;
      }),
    );
    expect(wrong).toEqual([]);
  });

  it("returns a new object each call (pino's mixin merge writes into it)", async () => {
    await run(function* () {
      yield* yield* spawn(
        function* () {
          const a = logFields();
          a.extra = 1;
          expect(logFields()).toEqual({ jobId: "x" });
        },
        { logFields: { jobId: "x" } },
      );
    });
  });

  it("rejects fields that are not an object", () => {
    expect(() => spawn(function* () {}, { logFields: "m1" as never })).toThrow(TypeError);
    expect(() => spawn(function* () {}, { logFields: null as never })).toThrow(/logFields/);
  });
});

describe("with real pino: a mixin reading logFields()", () => {
  it("stamps the application's lines and Keel's records with the task's fields", async () => {
    const raw: string[] = [];
    const log = pino(
      { level: "debug", base: null, timestamp: false, mixin: () => logFields() },
      { write: (s: string) => void raw.push(s) },
    );
    await run(
      function* () {
        const job = yield* spawn(
          function* handler() {
            log.info("in a step");
            yield* until(
              (async () => {
                await tick();
                log.info("in promise code");
              })(),
            );
            yield* suspend();
          },
          { logFields: { queue: "mail", jobId: "m9", attempt: 1 } },
        );
        yield* sleep(1);
        yield* job.cancel();
        log.info("in the root");
      },
      { logger: pinoLogger(log), logEvents: "debug" },
    );
    const lines = raw.map((s) => JSON.parse(s) as Record<string, unknown>);
    const inJob = lines.filter(
      (l) => l.msg === "in a step" || l.msg === "in promise code" || /handler#/.test(String(l.path)),
    );
    expect(inJob.length).toBeGreaterThanOrEqual(5); // two lines of its own; start, cancel:request, settle
    for (const l of inJob) expect(l).toMatchObject({ queue: "mail", jobId: "m9", attempt: 1 });
    expect(lines.find((l) => l.msg === "in the root")).not.toHaveProperty("jobId");
    // The mixin's object and the record's fields hold the same names once each.
    expect(raw.find((s) => s.includes("cancel:request"))?.match(/"jobId"/g)).toHaveLength(1);
  });
});

describe("levels: what a healthy worker writes at info", () => {
  const base = { at: 0, taskId: 2, path: "run#1/job#2", rootId: 1 } as const;
  const scope = { id: 1, kind: "task", label: "run" } as const;
  it("a scope's cancellations are debug, a shutdown's info; a job's start debug, its outcome info", () => {
    const request = (kind: string) =>
      levelOf({ ...base, type: "cancel:request", reason: { kind, at: 0 }, owner: scope } as KeelEvent);
    expect(["parent", "cancel", "timeout", "race-lost", "child-failed"].map(request)).toEqual(
      Array(5).fill("debug"),
    );
    expect(request("shutdown")).toBe("info");
    const job = (transition: string) =>
      levelOf({ ...base, type: "worker:job", queue: "q", jobId: "j", attempt: 1, transition } as KeelEvent);
    expect(["start", "complete", "retry", "dead-letter"].map(job)).toEqual(["debug", "info", "info", "info"]);
    for (const type of [
      "http:error",
      "http:timeout",
      "retry:sleep",
      "retry:success",
      "semaphore:wait",
      "limiter:wait",
    ])
      expect(levelOf({ ...base, type } as KeelEvent)).toBe("debug");
  });

  it("an info record's error has no stack unless it ended a job; a debug record's has", async () => {
    const boom = Object.assign(new TypeError("boom"), { code: "E_BOOM" });
    const giveup = {
      ...base,
      type: "retry:giveup",
      attempt: 3,
      reason: "attempts",
      delayMs: null,
      error: boom,
    } as KeelEvent;
    expect(errorAtInfo(giveup, boom)).toEqual({ type: "TypeError", message: "boom", code: "E_BOOM" });
    const dead = {
      ...base,
      type: "worker:job",
      queue: "q",
      jobId: "j",
      attempt: 1,
      transition: "dead-letter",
      error: boom,
    } as KeelEvent;
    expect(errorAtInfo(dead, boom)).toBe(boom);
    const records: LogRecord[] = [];
    await run(
      function* () {
        try {
          yield* timeout(5, suspend);
        } catch {}
      },
      { clock: createVirtualClock(), logger: (r) => records.push(r), logEvents: "debug" },
    );
    const ended = records.find((r) => r.event === "timeout:end")!;
    expect(ended.level).toBe("debug");
    expect((ended.fields.error as Error).stack).toMatch(/TimeoutError/);
  });
});

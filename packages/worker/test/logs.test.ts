/**
 * Logs that serve an operator (issue 24 item 5), through real pino: every line about a delivery
 * (Keel's records, and the handler's own lines through a mixin reading `logFields()`, promise code
 * included) carries the job's `queue`, `jobId` and `attempt`; `logEvents: "info"` writes at most
 * one line per job for jobs whose HTTP calls recover (its outcome), and a stack only for a dead
 * letter. The handlers call a real local server that answers 503 to the first request of each job.
 */
import { createServer, type Server } from "node:http";
import { constant, type LogEvents, logFields, pinoLogger, run, sleep, until } from "@keel/core";
import { createHttpClient } from "@keel/core/http";
import { createMemoryQueue, useWorker } from "@keel/worker";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

type Line = Record<string, unknown> & { msg: string; level: number };

let server: Server;
let baseUrl = "";

beforeAll(async () => {
  // `/ok/<id>`: 503 to the first request, then 200 (the client's retry recovers); `/dead/<id>`: 503 always.
  const seen = new Set<string>();
  server = createServer((req, res) => {
    const url = req.url ?? "";
    const first = !seen.has(url);
    seen.add(url);
    res.statusCode = url.startsWith("/dead/") || first ? 503 : 200;
    res.end(res.statusCode === 200 ? "{}" : "busy");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  baseUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});

afterAll(() => new Promise<void>((r) => server.close(() => r())));

/** Runs `ok` jobs that recover and `dead` jobs that dead-letter, logging to pino; the lines written. */
async function runJobs(prefix: string, ok: number, dead: number, logEvents: LogEvents) {
  const raw: string[] = [];
  const log = pino(
    { level: "debug", base: null, timestamp: false, mixin: () => logFields() },
    { write: (s: string) => void raw.push(s) },
  );
  const stats = await run(
    function* () {
      const client = yield* createHttpClient({ baseUrl, retry: { attempts: 3, backoff: constant(1) } });
      const queue = yield* createMemoryQueue<string>({ name: "mail" });
      for (let i = 0; i < ok; i++) yield* queue.add(`/ok/${prefix}${i}`, { id: `ok${i}` });
      for (let i = 0; i < dead; i++) yield* queue.add(`/dead/${prefix}${i}`, { id: `dead${i}` });
      const worker = yield* useWorker(
        queue,
        function* send(job) {
          log.info("sending");
          // The application's promise code, after an await: the mixin still reads the job.
          yield* until(
            (async () => {
              await new Promise((r) => setTimeout(r, 1));
              log.info("prepared");
            })(),
          );
          yield* client.getJson(job.data);
        },
        { concurrency: 4, retry: { attempts: 1 } },
      );
      for (;;) {
        const s = yield* worker.stats();
        const ended = Object.values(s.deadLettered).reduce((a, b) => a + b, s.completed);
        if (ended >= ok + dead) return s;
        yield* sleep(5);
      }
    },
    { logger: pinoLogger(log), logEvents },
  );
  return { stats, lines: raw.map((s) => JSON.parse(s) as Line), bytes: raw.join("").length };
}

const inDelivery = (l: Line) => /\/mail\/(ok|dead)\d+ attempt /.test(String(l.path ?? ""));

describe("a worker's logs", () => {
  it('logEvents "info": one line per job that recovered, a stack only where a job ended dead', async () => {
    const ok = 40;
    const dead = 2;
    const { stats, lines } = await runJobs("info", ok, dead, "info");
    expect(stats.completed).toBe(ok);
    expect(Object.values(stats.deadLettered).reduce((a, b) => a + b)).toBe(dead);
    const keel = lines.filter((l) => l.keel !== undefined);
    // Per job that recovered: its outcome. Per dead job: the retry given up, and the dead letter.
    // Beside them: the shutdown's steps.
    const shutdown = keel.filter((l) => l.keel === "worker:shutdown").length;
    expect(shutdown).toBeLessThanOrEqual(5);
    expect(keel.length).toBeLessThanOrEqual(ok + 2 * dead + shutdown);
    expect(keel.filter((l) => l.keel === "worker:job" && l.transition === "complete")).toHaveLength(ok);
    for (const l of keel.filter((l) => l.keel !== "worker:shutdown"))
      expect(l).toMatchObject({ queue: "mail", jobId: expect.any(String), attempt: 1 });
    // Stacks: only on the dead letters.
    const stacked = keel.filter((l) => JSON.stringify(l).includes('"stack"'));
    expect(stacked.map((l) => `${l.keel} ${l.transition}`)).toEqual(
      Array.from({ length: dead }, () => "worker:job dead-letter"),
    );
    // A retry's own attempt, hidden by the job's, keeps its value under its family's name.
    const giveup = keel.find((l) => l.keel === "retry:giveup");
    expect(giveup).toMatchObject({ attempt: 1, retryAttempt: 3 });
    expect(giveup).not.toHaveProperty("err");
    expect(giveup?.error).toEqual({
      type: "HttpError",
      message: expect.stringContaining("503"),
      code: "KEEL_HTTP_STATUS",
    });
    // The application's own lines, in a step and in promise code, carry the job through the mixin.
    const own = lines.filter((l) => l.msg === "sending" || l.msg === "prepared");
    expect(own).toHaveLength(2 * (ok + dead));
    for (const l of own)
      expect(l).toMatchObject({ queue: "mail", jobId: expect.stringMatching(/^(ok|dead)\d+$/), attempt: 1 });
  });

  it('logEvents "debug": every record about a delivery names its job, HTTP errors with their stacks', async () => {
    const { lines } = await runJobs("debug", 6, 1, "debug");
    const about = lines.filter(inDelivery);
    expect(about.map((l) => l.keel)).toEqual(
      expect.arrayContaining([
        "task:start",
        "timeout:start",
        "http:error",
        "retry:sleep",
        "retry:giveup",
        "task:settle",
      ]),
    );
    for (const l of about) {
      const id = /\/mail\/((ok|dead)\d+) attempt /.exec(String(l.path))![1];
      expect(l).toMatchObject({ queue: "mail", jobId: id, attempt: 1 });
    }
    const httpError = about.find((l) => l.keel === "http:error")!;
    expect(httpError.level).toBe(20);
    expect((httpError.err as { stack?: string }).stack).toMatch(/HttpError/);
  });
});

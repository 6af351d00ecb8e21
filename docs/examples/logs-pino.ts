/**
 * Logs with pino: Keel's warnings (and, with `logEvents`, its events) as structured records through
 * `pinoLogger`, written here to an in-memory stream so the program can check them.
 */
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { logFields, pinoLogger, run, shield, sleep, spawn, suspend, timeout, until } from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import pino from "pino";

const lines: Record<string, unknown>[] = [];
const stream = new Writable({
  write(chunk, _encoding, done) {
    for (const line of String(chunk).split("\n")) if (line) lines.push(JSON.parse(line));
    done();
  },
});
const log = pino({ level: "debug" }, stream);

// 1. A warning: a cleanup that overruns its budget, logged at level warn with the task's path.
await run(
  function* app() {
    const worker = yield* spawn(function* worker() {
      try {
        yield* suspend();
      } finally {
        yield* shield(sleep(300)); // slower than the 100 ms budget
      }
    });
    yield* sleep(50);
    yield* worker.cancel();
  },
  { clock: createVirtualClock(), cleanupBudgetMs: 100, logger: pinoLogger(log) },
);
const overrun = lines.find((l) => l.keel === "cleanup:overrun")!;
assert.equal(overrun.level, 40); // pino's warn
assert.match(String(overrun.path), /^app#\d+\/worker#\d+$/);
assert.equal(overrun.sinceStartMs, 150);
assert.equal(overrun.budgetMs, 100);

// 2. Events on request: "info" adds what an operator reads (a timeout that fired, a retry given up,
// a breaker, a job's outcome); the timeout's own cancellation request is debug.
lines.length = 0;
await run(
  function* report() {
    try {
      yield* timeout(10, sleep(100));
    } catch {}
  },
  { clock: createVirtualClock(), logger: pinoLogger(log), logEvents: "info" },
);
assert.deepEqual(
  lines.map((l) => l.keel),
  ["timeout:fire"],
);
assert.ok(lines.every((l) => l.level === 30)); // pino's info

// 3. An error that reached its caller is not logged: the caller has it.
lines.length = 0;
await run(
  function* failing() {
    throw new Error("handled by the caller");
  },
  { logger: pinoLogger(log) },
).catch(() => {});
assert.deepEqual(lines, []);

// 4. Log fields: a task spawned with `logFields` (a worker spawns each delivery with its queue, job
// id and attempt) puts them on Keel's records about it, and a mixin reading `logFields()` puts them
// on the application's own lines, in promise code too.
const mine: Record<string, unknown>[] = [];
const withJob = pino(
  { level: "debug", mixin: () => logFields() },
  new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split("\n")) if (line) mine.push(JSON.parse(line));
      done();
    },
  }),
);
await run(
  function* service() {
    const job = yield* spawn(
      function* handler() {
        withJob.info("sending");
        yield* until(Promise.resolve().then(() => withJob.info("sent")));
        try {
          yield* timeout(10, suspend);
        } catch {} // its TimeoutError
      },
      { logFields: { queue: "mail", jobId: "m1", attempt: 1 } },
    );
    yield* job;
  },
  { clock: createVirtualClock(), logger: pinoLogger(withJob), logEvents: "info" },
);
assert.deepEqual(
  mine.map((l) => [String(l.msg).split(" at ")[0], l.jobId]),
  [
    ["sending", "m1"],
    ["sent", "m1"],
    ["keel: timeout:fire", "m1"],
  ],
);

console.log("logs-pino: ok");

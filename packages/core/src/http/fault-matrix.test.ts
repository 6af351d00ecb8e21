/**
 * The fault matrix: every fault-server behaviour × {no retry, default retry} × {cancelled during the
 * behaviour's phase, not cancelled}, each cell one test of `client.getJson("/r")`.
 *
 * Limits, the same in every cell: `connectMs 200, headersMs 200, bodyIdleMs 150, totalMs 2000`.
 * - Scripted answers come 50 ms (100 ms for "hang after headers") after arrival, so every phase lasts
 *   a while and a cancel can land inside it; no scripted instant coincides with a limit.
 * - connectMs/headersMs (200) and bodyIdleMs (150) differ from each other and from every scripted
 *   delay, so the instant a call fails says which limit fired.
 * - totalMs (2000) is above the ≤ 1100 ms that three failing attempts take here, so the default retry
 *   runs out of attempts, not of time; the two cells that reach it are decisive about it: the forever
 *   drip (1 byte every 100 ms, inside bodyIdleMs) is stopped only by totalMs, and Retry-After 1 s makes
 *   the retry refuse a sleep that would cross it (reason "deadline").
 * - "Default retry" is the client's default policy (3 attempts in all, exponential 200 ms ×2 with full
 *   jitter), with the runtime's random source pinned to 0.5 (`withRandom`), so the sleeps between
 *   attempts are exactly 100 and 200 ms.
 *
 * Each cell asserts: when the call returns or throws, the error's type and phase/status/code, the
 * caller's final state, the arrival of every request the server saw, the close instant of every
 * connection it accepted (one per attempt, unless kept alive), and, once the client's scope has
 * exited: no server-side socket open, no client-side TCP handle left, no pending timer, no live task.
 *
 * The connect-hang row is the one that needs real time: its listener is a child process, and a
 * client connecting to it waits on a real SYN that is never answered (its origin is declared idle,
 * so virtual time still jumps to the limits). Those cells get a longer test timeout.
 */
import {
  isCancelled,
  isRetryExhaustedError,
  isTaskCancelledError,
  type Operation,
  scoped,
  sleep,
  snapshot,
  spawn,
  type Task,
  until,
  withRandom,
} from "@keel/core";
import { createHttpClient, HttpError, HttpTimeoutError, type HttpTimeouts } from "@keel/core/http";
import { createFaultServer, createHarness, type FaultServer, type RouteScript } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { countHandles } from "../../test/support/http.js";

const LIMITS: HttpTimeouts = { connectMs: 200, headersMs: 200, bodyIdleMs: 150, totalMs: 2000 };

// ---------------------------------------------------------------------------------------------
// Outcomes, as plain data so that a failing cell shows the whole difference at once.

type Outcome =
  | { kind: "value"; value: unknown }
  | { kind: "HttpTimeoutError"; phase: string }
  | { kind: "HttpError"; status: number; retryAfterMs?: number }
  | { kind: "network"; code: string }
  | { kind: "RetryExhaustedError"; reason: string; attempts: number; cause: Outcome }
  | { kind: "TaskCancelledError" }
  | { kind: "other"; name: string; message: string };

const value = (v: unknown): Outcome => ({ kind: "value", value: v });
const timedOut = (phase: string): Outcome => ({ kind: "HttpTimeoutError", phase });
const status = (s: number, retryAfterMs?: number): Outcome =>
  retryAfterMs === undefined
    ? { kind: "HttpError", status: s }
    : { kind: "HttpError", status: s, retryAfterMs };
const network = (code: string): Outcome => ({ kind: "network", code });
const exhausted = (reason: string, attempts: number, cause: Outcome): Outcome => ({
  kind: "RetryExhaustedError",
  reason,
  attempts,
  cause,
});
const cancelled: Outcome = { kind: "TaskCancelledError" };

/** The network error's code, or its message when it has none (node's "socket hang up"). */
function networkCode(e: unknown): string | null {
  const x = e as { code?: unknown; message?: unknown };
  if (typeof x.code === "string" && !x.code.startsWith("KEEL_")) return x.code;
  if (typeof x.message === "string" && /socket hang up/i.test(x.message)) return "socket hang up";
  return null;
}

function outcomeOf(e: unknown): Outcome {
  if (e instanceof HttpTimeoutError) return timedOut(e.phase);
  if (e instanceof HttpError) return status(e.status, e.retryAfterMs);
  if (isRetryExhaustedError(e))
    return exhausted(e.reason, e.attempts, outcomeOf((e as Error & { cause?: unknown }).cause));
  if (isTaskCancelledError(e)) return cancelled;
  const code = networkCode(e);
  if (code !== null) return network(code);
  return e instanceof Error
    ? { kind: "other", name: e.name, message: e.message }
    : { kind: "other", name: typeof e, message: String(e) };
}

function describeOutcome(o: Outcome): string {
  switch (o.kind) {
    case "value":
      return `returns ${JSON.stringify(o.value)}`;
    case "HttpTimeoutError":
      return `HttpTimeoutError phase "${o.phase}"`;
    case "HttpError":
      return `HttpError ${o.status}${o.retryAfterMs === undefined ? "" : ` (retryAfterMs ${o.retryAfterMs})`}`;
    case "network":
      return o.code;
    case "RetryExhaustedError":
      return `RetryExhaustedError "${o.reason}" after ${o.attempts} attempts (last: ${describeOutcome(o.cause)})`;
    case "TaskCancelledError":
      return "TaskCancelledError";
    case "other":
      return `${o.name}: ${o.message}`;
  }
}

// ---------------------------------------------------------------------------------------------
// The table: one row per behaviour, four cells per row.

type RetryMode = "no retry" | "default retry";

/** When the cell cancels the call: at a virtual instant, or as soon as the call waits on `waitingOn`. */
type Cancel = { phase: string; atMs: number } | { phase: string; waitingOn: string };

interface Cell {
  retry: RetryMode;
  cancel: Cancel | null;
  outcome: Outcome;
  /** When `getJson` returns or throws. */
  at: number;
  /** The server's `arrivedAt` of each request. */
  arrivals: number[];
  /** The server's `closedAt` of each connection, in accept order. */
  closedAt: number[];
}

interface Row {
  behaviour: string;
  script: RouteScript;
  /** Which of the fault server's URLs the client talks to. */
  target: "url" | "refusedUrl" | "connectHangUrl";
  cells: Cell[];
}

const JSON_OK = { ok: true };

const ROWS: Row[] = [
  {
    behaviour: "respond 200 JSON after 50 ms",
    script: { status: 200, json: JSON_OK, delayMs: 50 },
    target: "url",
    cells: [
      { retry: "no retry", cancel: null, outcome: value(JSON_OK), at: 50, arrivals: [0], closedAt: [50] },
      {
        retry: "default retry",
        cancel: null,
        outcome: value(JSON_OK),
        at: 50,
        arrivals: [0],
        closedAt: [50],
      },
      {
        retry: "no retry",
        cancel: { phase: "headers", atMs: 25 },
        outcome: cancelled,
        at: 25,
        arrivals: [0],
        closedAt: [25],
      },
      {
        retry: "default retry",
        cancel: { phase: "headers", atMs: 25 },
        outcome: cancelled,
        at: 25,
        arrivals: [0],
        closedAt: [25],
      },
    ],
  },
  {
    behaviour: "sequence [503, 503, 200], each after 50 ms",
    script: [
      { status: 503, delayMs: 50 },
      { status: 503, delayMs: 50 },
      { status: 200, json: JSON_OK, delayMs: 50 },
    ],
    target: "url",
    cells: [
      { retry: "no retry", cancel: null, outcome: status(503), at: 50, arrivals: [0], closedAt: [50] },
      // 503 at 50, sleep 100, 503 at 200, sleep 200, 200 at 450; one kept-alive connection.
      {
        retry: "default retry",
        cancel: null,
        outcome: value(JSON_OK),
        at: 450,
        arrivals: [0, 150, 400],
        closedAt: [450],
      },
      {
        retry: "no retry",
        cancel: { phase: "headers", atMs: 25 },
        outcome: cancelled,
        at: 25,
        arrivals: [0],
        closedAt: [25],
      },
      {
        retry: "default retry",
        cancel: { phase: "the first backoff sleep", atMs: 100 },
        outcome: cancelled,
        at: 100,
        arrivals: [0],
        closedAt: [100],
      },
    ],
  },
  {
    behaviour: "503 with Retry-After 1 s, after 50 ms",
    script: { status: 503, retryAfter: 1, delayMs: 50 },
    target: "url",
    cells: [
      {
        retry: "no retry",
        cancel: null,
        outcome: status(503, 1000),
        at: 50,
        arrivals: [0],
        closedAt: [50],
      },
      // 503 at 50, sleep 1000 (Retry-After, not backoff's 100), 503 at 1100; a second 1000 ms sleep
      // would end at 2100, past totalMs: the retry gives up at once.
      {
        retry: "default retry",
        cancel: null,
        outcome: exhausted("deadline", 2, status(503, 1000)),
        at: 1100,
        arrivals: [0, 1050],
        closedAt: [1100],
      },
      {
        retry: "no retry",
        cancel: { phase: "headers", atMs: 25 },
        outcome: cancelled,
        at: 25,
        arrivals: [0],
        closedAt: [25],
      },
      // Backoff would have sent the second request at 150; Retry-After keeps it back past 500.
      {
        retry: "default retry",
        cancel: { phase: "the Retry-After sleep", atMs: 500 },
        outcome: cancelled,
        at: 500,
        arrivals: [0],
        closedAt: [500],
      },
    ],
  },
  {
    behaviour: "hang before headers",
    script: { hang: "before-headers" },
    target: "url",
    cells: [
      {
        retry: "no retry",
        cancel: null,
        outcome: timedOut("headers"),
        at: 200,
        arrivals: [0],
        closedAt: [200],
      },
      // Timeouts at 200, 500 (300 + 200), 900 (700 + 200).
      {
        retry: "default retry",
        cancel: null,
        outcome: exhausted("attempts", 3, timedOut("headers")),
        at: 900,
        arrivals: [0, 300, 700],
        closedAt: [200, 500, 900],
      },
      {
        retry: "no retry",
        cancel: { phase: "headers", atMs: 100 },
        outcome: cancelled,
        at: 100,
        arrivals: [0],
        closedAt: [100],
      },
      {
        retry: "default retry",
        cancel: { phase: "the second attempt's headers", atMs: 400 },
        outcome: cancelled,
        at: 400,
        arrivals: [0, 300],
        closedAt: [200, 400],
      },
    ],
  },
  {
    behaviour: "hang after headers sent at 100 ms",
    script: { hang: "after-headers", delayMs: 100 },
    target: "url",
    cells: [
      // Head at 100, then no body byte ever. bodyIdleMs bounds the gaps *between* chunks
      // (conformance 116(d)), so totalMs is what stops it, and it covers the retries too.
      {
        retry: "no retry",
        cancel: null,
        outcome: timedOut("total"),
        at: 2000,
        arrivals: [0],
        closedAt: [2000],
      },
      {
        retry: "default retry",
        cancel: null,
        outcome: timedOut("total"),
        at: 2000,
        arrivals: [0],
        closedAt: [2000],
      },
      {
        retry: "no retry",
        cancel: { phase: "body", atMs: 150 },
        outcome: cancelled,
        at: 150,
        arrivals: [0],
        closedAt: [150],
      },
      {
        retry: "default retry",
        cancel: { phase: "body", atMs: 150 },
        outcome: cancelled,
        at: 150,
        arrivals: [0],
        closedAt: [150],
      },
    ],
  },
  {
    behaviour: "drip 1 byte every 100 ms, forever",
    script: { drip: { chunk: 1, everyMs: 100, count: Infinity } },
    target: "url",
    cells: [
      // Every gap (100) is inside bodyIdleMs (150): only totalMs stops it.
      {
        retry: "no retry",
        cancel: null,
        outcome: timedOut("total"),
        at: 2000,
        arrivals: [0],
        closedAt: [2000],
      },
      // The total budget encloses the retry: its expiry is a cancellation there, never retried.
      {
        retry: "default retry",
        cancel: null,
        outcome: timedOut("total"),
        at: 2000,
        arrivals: [0],
        closedAt: [2000],
      },
      {
        retry: "no retry",
        cancel: { phase: "body", atMs: 550 },
        outcome: cancelled,
        at: 550,
        arrivals: [0],
        closedAt: [550],
      },
      {
        retry: "default retry",
        cancel: { phase: "body", atMs: 550 },
        outcome: cancelled,
        at: 550,
        arrivals: [0],
        closedAt: [550],
      },
    ],
  },
  {
    behaviour: "reset after headers, at 50 ms",
    script: { reset: "after-headers", delayMs: 50 },
    target: "url",
    cells: [
      {
        retry: "no retry",
        cancel: null,
        outcome: network("ECONNRESET"),
        at: 50,
        arrivals: [0],
        closedAt: [50],
      },
      // Resets at 50, 200 (150 + 50), 450 (400 + 50).
      {
        retry: "default retry",
        cancel: null,
        outcome: exhausted("attempts", 3, network("ECONNRESET")),
        at: 450,
        arrivals: [0, 150, 400],
        closedAt: [50, 200, 450],
      },
      {
        retry: "no retry",
        cancel: { phase: "headers", atMs: 25 },
        outcome: cancelled,
        at: 25,
        arrivals: [0],
        closedAt: [25],
      },
      {
        retry: "default retry",
        cancel: { phase: "the first backoff sleep", atMs: 100 },
        outcome: cancelled,
        at: 100,
        arrivals: [0],
        closedAt: [50],
      },
    ],
  },
  {
    behaviour: "reset mid-body after 10 bytes, at 50 ms",
    script: { reset: "mid-body", afterBytes: 10, delayMs: 50 },
    target: "url",
    cells: [
      {
        retry: "no retry",
        cancel: null,
        outcome: network("ECONNRESET"),
        at: 50,
        arrivals: [0],
        closedAt: [50],
      },
      {
        retry: "default retry",
        cancel: null,
        outcome: exhausted("attempts", 3, network("ECONNRESET")),
        at: 450,
        arrivals: [0, 150, 400],
        closedAt: [50, 200, 450],
      },
      {
        retry: "no retry",
        cancel: { phase: "headers", atMs: 25 },
        outcome: cancelled,
        at: 25,
        arrivals: [0],
        closedAt: [25],
      },
      {
        retry: "default retry",
        cancel: { phase: "the second attempt's headers", atMs: 175 },
        outcome: cancelled,
        at: 175,
        arrivals: [0, 150],
        closedAt: [50, 175],
      },
    ],
  },
  {
    behaviour: "close without response, at 50 ms",
    script: { close: "without-response", delayMs: 50 },
    target: "url",
    // A FIN before any byte: node's http client calls it "socket hang up", undici "other side closed"
    // with code UND_ERR_SOCKET, passed through raw and retried as a network error.
    cells: [
      {
        retry: "no retry",
        cancel: null,
        outcome: network("UND_ERR_SOCKET"),
        at: 50,
        arrivals: [0],
        closedAt: [50],
      },
      {
        retry: "default retry",
        cancel: null,
        outcome: exhausted("attempts", 3, network("UND_ERR_SOCKET")),
        at: 450,
        arrivals: [0, 150, 400],
        closedAt: [50, 200, 450],
      },
      {
        retry: "no retry",
        cancel: { phase: "headers", atMs: 25 },
        outcome: cancelled,
        at: 25,
        arrivals: [0],
        closedAt: [25],
      },
      {
        retry: "default retry",
        cancel: { phase: "the third attempt's headers", atMs: 425 },
        outcome: cancelled,
        at: 425,
        arrivals: [0, 150, 400],
        closedAt: [50, 200, 425],
      },
    ],
  },
  {
    behaviour: "refused connection",
    script: 200,
    target: "refusedUrl",
    cells: [
      {
        retry: "no retry",
        cancel: null,
        outcome: network("ECONNREFUSED"),
        at: 0,
        arrivals: [],
        closedAt: [],
      },
      // Refused at 0, 100, 300: a connect error is retried for any method.
      {
        retry: "default retry",
        cancel: null,
        outcome: exhausted("attempts", 3, network("ECONNREFUSED")),
        at: 300,
        arrivals: [],
        closedAt: [],
      },
      // The refusal takes no virtual time, so the cancel comes in the same instant, as soon as the
      // task tree shows the call connecting (before the refusal can be read from the socket).
      {
        retry: "no retry",
        cancel: { phase: "connect", waitingOn: "GET /r: connecting" },
        outcome: cancelled,
        at: 0,
        arrivals: [],
        closedAt: [],
      },
      {
        retry: "default retry",
        cancel: { phase: "the first backoff sleep", atMs: 50 },
        outcome: cancelled,
        at: 50,
        arrivals: [],
        closedAt: [],
      },
    ],
  },
  {
    behaviour: "connect that never completes",
    script: 200,
    target: "connectHangUrl",
    cells: [
      {
        retry: "no retry",
        cancel: null,
        outcome: timedOut("connect"),
        at: 200,
        arrivals: [],
        closedAt: [],
      },
      // Connect timeouts at 200, 500 (300 + 200), 900 (700 + 200).
      {
        retry: "default retry",
        cancel: null,
        outcome: exhausted("attempts", 3, timedOut("connect")),
        at: 900,
        arrivals: [],
        closedAt: [],
      },
      {
        retry: "no retry",
        cancel: { phase: "connect", atMs: 100 },
        outcome: cancelled,
        at: 100,
        arrivals: [],
        closedAt: [],
      },
      {
        retry: "default retry",
        cancel: { phase: "the second attempt's connect", atMs: 400 },
        outcome: cancelled,
        at: 400,
        arrivals: [],
        closedAt: [],
      },
    ],
  },
];

function nameOf(row: Row, cell: Cell): string {
  const cancel = cell.cancel ? `cancelled during ${cell.cancel.phase}` : "not cancelled";
  const requests = `${cell.arrivals.length} request${cell.arrivals.length === 1 ? "" : "s"}`;
  const sockets =
    cell.closedAt.length === 0
      ? "no connection reached the server"
      : `socket${cell.closedAt.length === 1 ? "" : "s"} closed at ${cell.closedAt.join(", ")}`;
  return `${row.behaviour} × ${cell.retry} × ${cancel}: ${describeOutcome(cell.outcome)} at ${cell.at}, ${requests}, ${sockets}`;
}

// ---------------------------------------------------------------------------------------------
// Client-side sockets: node's TCP handles (sockets, connecting sockets, listeners), counted while the
// fault server still runs, so that a connect left hanging cannot end by itself before the count.

const watched = ["TCPSocketWrap", "TCPWrap", "TCPServerWrap"];
function handles(): Record<string, number> {
  return countHandles(watched);
}
function excessOver(before: Record<string, number>): string[] {
  return Object.entries(handles())
    .filter(([k, n]) => n > (before[k] ?? 0))
    .map(([k, n]) => `${n - (before[k] ?? 0)} ${k} more than before the client`);
}

/**
 * Cancels `call` as soon as its task tree says it waits on `waitingOn`. Only microtasks run between
 * two looks, so no I/O (such as a refusal) can reach the client before the cancel.
 */
function* cancelWhenWaiting(call: Task<unknown>, waitingOn: string): Operation<void> {
  const waits = (s: ReturnType<typeof snapshot>): boolean =>
    s.waitingOn === waitingOn || s.children.some(waits);
  for (let i = 0; !waits(snapshot(call)); i++) {
    if (i >= 1000 || call.state !== "running") throw new Error(`the call never waited on "${waitingOn}"`);
    yield* until(Promise.resolve());
  }
  yield* call.cancel();
}

// ---------------------------------------------------------------------------------------------

interface Observed {
  outcome: Outcome;
  at: number;
  state: string;
  arrivals: number[];
  closedAt: (number | null)[];
  openSockets: number;
  /** Client-side TCP handles left once the client's scope has exited. */
  clientHandles: string[];
  /** What `h.expectClean()` said. */
  leakCheck: string;
}

/** Gives real I/O a few loop turns (not virtual time: the client and server hold it meanwhile). */
function* ioTurns(done: () => boolean): Operation<void> {
  for (let i = 0; i < 200 && !done(); i++) yield* until(new Promise<void>((r) => setImmediate(r)));
}

async function runCell(row: Row, cell: Cell): Promise<Observed> {
  const h = createHarness();
  const observed: Omit<Observed, "leakCheck"> = await h.run(function* matrixCell() {
    const server: FaultServer = yield* createFaultServer(
      { "/r": row.script },
      { connectHang: row.target === "connectHangUrl" },
    );
    const baseUrl = server[row.target];
    const before = handles();
    // The client lives in the inner scope, so its pool has closed by the time the outcome is known;
    // an error becomes a value (a failed child would fail this task), a cancellation stays one.
    const call = yield* spawn(function* caller() {
      try {
        const v = yield* scoped(function* request() {
          const client = yield* createHttpClient({ baseUrl, timeouts: LIMITS });
          const options = cell.retry === "no retry" ? { retry: false as const } : {};
          return yield* withRandom(() => 0.5, client.getJson("/r", options));
        });
        return { ok: true as const, v };
      } catch (e) {
        if (isCancelled(e)) throw e;
        return { ok: false as const, e };
      }
    });
    const cancel = cell.cancel;
    if (cancel) {
      yield* spawn(function* canceller() {
        if ("atMs" in cancel) {
          yield* sleep(cancel.atMs);
          yield* call.cancel();
        } else {
          yield* cancelWhenWaiting(call, cancel.waitingOn);
        }
      });
    }
    let outcome: Outcome;
    try {
      const r = yield* call;
      outcome = r.ok ? value(r.v) : outcomeOf(r.e);
    } catch (e) {
      outcome = outcomeOf(e);
    }
    const at = h.clock.now();
    // The client's scope has exited: let both sides read the closes that are on their way.
    yield* ioTurns(() => server.openSockets === 0 && excessOver(before).length === 0);
    return {
      outcome,
      at,
      state: call.state,
      arrivals: server.requests.map((r) => r.arrivedAt),
      closedAt: server.connections.map((c) => c.closedAt),
      openSockets: server.openSockets,
      clientHandles: excessOver(before),
    };
  });
  let leakCheck = "clean";
  try {
    await h.expectClean();
  } catch (e) {
    leakCheck = (e as Error).message;
  }
  return { ...observed, leakCheck };
}

// `%s` rather than `$name`: vitest prints `$` values quoted and cut at 40 characters.
describe.each(ROWS.map((row) => [row.behaviour, row] as const))("fault matrix: %s", (_, row) => {
  const timeoutMs = row.target === "connectHangUrl" ? 30_000 : 20_000;
  it.each(row.cells.map((cell) => [nameOf(row, cell), cell] as const))(
    "%s",
    async (_name, cell) => {
      const seen = await runCell(row, cell);
      expect({ outcome: seen.outcome, at: seen.at }).toEqual({ outcome: cell.outcome, at: cell.at });
      expect(seen.state).toBe(cell.cancel ? "cancelled" : "completed");
      expect(seen.arrivals).toEqual(cell.arrivals);
      expect(seen.closedAt).toEqual(cell.closedAt);
      expect(seen.openSockets).toBe(0);
      expect(seen.clientHandles).toEqual([]);
      expect(seen.leakCheck).toBe("clean");
    },
    timeoutMs,
  );
});

/**
 * Poison values (issue 23) in the event stream and the logging around it: describing, printing,
 * emitting and logging a value that throws from every trap, getter or conversion never throws.
 */
import { inspect } from "node:util";
import { afterEach, describe, expect, it, vi } from "vitest";
import { describeThrown, printThrown } from "../format-value.js";
import {
  emitEvent,
  isCancelled,
  type KeelEvent,
  type LogRecord,
  pinoLogger,
  run,
  timeout,
} from "../index.js";

function hostileProxy(): object {
  const handler = new Proxy(
    {},
    {
      get: (_t, trap) => () => {
        throw new Error(`trap ${String(trap)}`);
      },
    },
  );
  return new Proxy({}, handler);
}

function errorWithThrowing(key: string): Error {
  const e = new Error("plain");
  Object.defineProperty(e, key, {
    get() {
      throw new Error(`${key} getter`);
    },
  });
  return e;
}

const poisons: [string, () => unknown][] = [
  ["a Proxy whose every trap throws", hostileProxy],
  [
    "a revoked Proxy",
    () => {
      const r = Proxy.revocable({}, {});
      r.revoke();
      return r.proxy;
    },
  ],
  ["a null-prototype object", () => Object.assign(Object.create(null), { a: 1 })],
  ["an Error whose stack getter throws", () => errorWithThrowing("stack")],
  ["an Error whose message getter throws", () => errorWithThrowing("message")],
  ["an Error whose name getter throws", () => errorWithThrowing("name")],
  ["an Error whose code is a BigInt", () => Object.assign(new Error("m"), { code: 10n })],
  [
    "an object whose inspect, toString, toPrimitive and toJSON throw",
    () => ({
      [inspect.custom]() {
        throw new Error("inspect");
      },
      toString() {
        throw new Error("toString");
      },
      [Symbol.toPrimitive]() {
        throw new Error("toPrimitive");
      },
      toJSON() {
        throw new Error("toJSON");
      },
    }),
  ],
  ["a Symbol", () => Symbol("x")],
  ["a BigInt", () => 10n],
  ["an Error with a 1 MB message", () => new Error("x".repeat(1_000_000))],
];

describe("poison values in descriptions, prints, events and logs", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it.each(poisons)("describeThrown gives one bounded line for %s", (_name, make) => {
    const text = describeThrown(make());
    expect(typeof text).toBe("string");
    expect(text.length).toBeLessThanOrEqual(200);
  });

  it("describeThrown of an object holding megabytes reads only what it shows", () => {
    const big = { rows: Array.from({ length: 1_000_000 }, (_, i) => i), blob: "y".repeat(5_000_000) };
    const text = describeThrown(big);
    expect(text.startsWith('{"rows":[0,1,2,')).toBe(true);
    expect(text.length).toBeLessThanOrEqual(200);
  });

  it.each(poisons)("printThrown prints %s without throwing", (_name, make) => {
    const lines: string[] = [];
    vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => {
      lines.push(args.map((a) => (typeof a === "string" ? a : inspect(a))).join(" "));
    });
    expect(() => printThrown("keel: test", make())).not.toThrow();
    expect(lines.length).toBe(1);
    expect(lines[0]!.startsWith("keel: test")).toBe(true);
  });

  it.each(poisons)("an event carrying %s reaches onEvent, a logger and pino's shape", async (_name, make) => {
    const seen: KeelEvent[] = [];
    const records: LogRecord[] = [];
    const pinoLines: string[] = [];
    const pino = {
      warn: (_o: Record<string, unknown>, m: string) => pinoLines.push(m),
      info: (_o: Record<string, unknown>, m: string) => pinoLines.push(m),
      debug: (_o: Record<string, unknown>, m: string) => pinoLines.push(m),
    };
    const printed = vi.spyOn(console, "error").mockImplementation(() => {});
    const error = make();
    for (const logger of [(r: LogRecord) => records.push(r), pinoLogger(pino)])
      await run(
        function* emitPoison() {
          yield* emitEvent({
            type: "worker:job",
            queue: "q",
            jobId: "p",
            attempt: 1,
            transition: "dead-letter",
            reason: "rejected",
            error,
          });
        },
        { onEvent: (e) => seen.push(e), logger, logEvents: "info" },
      );
    const events = seen.filter((e) => e.type === "worker:job");
    expect(events.length).toBe(2);
    expect(Object.is((events[0] as { error?: unknown }).error, error)).toBe(true);
    const said = records.filter((r) => r.event === "worker:job").map((r) => r.message);
    expect(said).toEqual([expect.stringMatching(/^keel: worker:job at emitPoison#\d+$/)]);
    expect(pinoLines).toEqual([expect.stringMatching(/^keel: worker:job at emitPoison#\d+$/)]);
    expect(printed).not.toHaveBeenCalled();
  });

  it("an onEvent or a logger that throws a poison value is reported, and the run goes on", async () => {
    const printed: string[] = [];
    vi.spyOn(console, "error").mockImplementation((line: unknown) => {
      printed.push(String(line));
    });
    const value = await run(
      function* throwingListeners() {
        yield* emitEvent({ type: "worker:job", queue: "q", jobId: "p", attempt: 1, transition: "complete" });
        return "went on";
      },
      {
        onEvent: (e) => {
          if (e.type === "worker:job") throw errorWithThrowing("stack");
        },
        logger: () => {
          throw hostileProxy();
        },
        logEvents: "info",
      },
    );
    expect(value).toBe("went on");
    expect(printed).toContain("keel: a logger threw");
    expect(printed).toContain("keel: an onEvent handler threw");
  });
});

describe("isCancelled on a poison value", () => {
  it("answers false for a Proxy whose traps throw and for a revoked one, and a task that throws one fails with that value", async () => {
    const revocable = Proxy.revocable({}, {});
    revocable.revoke();
    for (const v of [hostileProxy(), revocable.proxy]) expect(isCancelled(v)).toBe(false);
    const thrown = hostileProxy();
    // Held in a box: a promise resolved with the Proxy itself would read its `then` (and throw).
    const box: { error?: unknown } = {};
    await run(function* throwsAProxy() {
      yield* timeout(1_000, function* () {
        throw thrown;
      });
    }).then(
      () => {},
      (e: unknown) => {
        box.error = e;
      },
    );
    // The value itself, not the trap's error: the timeout scope's unwinding asked whether it was
    // a Cancelled, and that question no longer throws.
    expect(box.error === thrown).toBe(true);
  });
});

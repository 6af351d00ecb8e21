import { channel, subscribe, unsubscribe } from "node:diagnostics_channel";
import { createServer } from "node:http";
import {
  all,
  constant,
  createChannel,
  createCircuitBreaker,
  createRateLimiter,
  createSemaphore,
  emitEvent,
  eventsWanted,
  KEEL_CHANNELS,
  type KeelEvent,
  retry,
  run,
  shield,
  sleep,
  spawn,
  suspend,
  timeout,
  withCleanupBudget,
} from "@keel/core";
import { createHttpClient } from "@keel/core/http";
import { createVirtualClock } from "@keel/testing";
import { afterEach, describe, expect, it, vi } from "vitest";
import { channelsActive } from "../src/kernel/diagnostics.js";

type Family = keyof typeof KEEL_CHANNELS;
const families = Object.keys(KEEL_CHANNELS) as Family[];

/** Subscribes one collector to every Keel channel; returns what each channel received. */
function collectAll(): { byChannel: Map<string, KeelEvent[]>; stop(): void } {
  const byChannel = new Map<string, KeelEvent[]>();
  const subs = families.map((f) => {
    const name = KEEL_CHANNELS[f];
    byChannel.set(name, []);
    const fn = (m: unknown, n: string | symbol) => byChannel.get(String(n))!.push(m as KeelEvent);
    subscribe(name, fn);
    return () => unsubscribe(name, fn);
  });
  return {
    byChannel,
    stop: () => {
      for (const s of subs) s();
    },
  };
}

/** One run that makes every family of the kernel and the resilience layer emit. */
function* everything(tag: string) {
  const sem = createSemaphore(1, { name: `sem-${tag}` });
  const limiter = createRateLimiter({ perSecond: 10, name: `lim-${tag}` });
  const ch = createChannel<number>({ capacity: 1, name: `ch-${tag}` });
  const breaker = createCircuitBreaker({ name: `br-${tag}`, failureThreshold: 1, halfOpenAfterMs: 1000 });
  const hold = () => sem.use(() => sleep(10));
  yield* all([hold, hold]);
  yield* limiter.take();
  yield* limiter.take();
  yield* ch.send(1);
  yield* ch.receive();
  try {
    yield* timeout(5, () => sleep(100));
  } catch {}
  let calls = 0;
  yield* retry(
    function* flaky() {
      if (++calls === 1) throw new Error("once");
    },
    { attempts: 3, backoff: constant(1), retryOn: () => true },
  );
  try {
    yield* breaker.run(function* () {
      throw new Error("down");
    });
  } catch {}
  yield* emitEvent({ type: "worker:job", queue: `q-${tag}`, jobId: "j1", attempt: 1, transition: "start" });
  yield* emitEvent({
    type: "workflow:step",
    workflow: "w",
    executionId: `e-${tag}`,
    key: "s#1",
    transition: "start",
  });
  const child = yield* spawn(function* stubborn() {
    try {
      yield* shield(() => sleep(3), { limitMs: 50 });
      yield* suspend();
    } finally {
      yield* withCleanupBudget(2, () => sleep(20));
      yield* sleep(100);
    }
  });
  yield* sleep(1);
  yield* child.cancel();
}

describe("events on node:diagnostics_channel", () => {
  afterEach(() => vi.restoreAllMocks());

  it("publishes every family of two concurrent runs, each event with its run's root id", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const { byChannel, stop } = collectAll();
    const clock = createVirtualClock();
    try {
      const a = run(() => everything("a"), { clock, name: "a", cleanupBudgetMs: 20 });
      const b = run(() => everything("b"), { clock, name: "b", cleanupBudgetMs: 20 });
      await Promise.all([a, b]);
      const expected: Record<Family, string[]> = {
        task: ["task:start", "task:settle"],
        cancel: ["cancel:request"],
        timeout: ["timeout:fire"],
        cleanup: ["cleanup:overrun"],
        shield: ["shield:delay"],
        error: [],
        retry: ["retry:attempt", "retry:sleep"],
        http: [],
        breaker: ["breaker:state"],
        semaphore: ["semaphore:wait", "semaphore:acquire"],
        limiter: ["limiter:wait", "limiter:acquire"],
        channel: ["channel:depth"],
        worker: ["worker:job"],
        workflow: ["workflow:step"],
        deadline: [],
      };
      for (const f of families) {
        const got = byChannel.get(KEEL_CHANNELS[f])!;
        // Only the family's own events on its channel.
        expect(got.every((e) => e.type.startsWith(`${f}:`))).toBe(true);
        for (const type of expected[f])
          for (const root of [a.id, b.id])
            expect(
              got.some((e) => e.type === type && e.rootId === root),
              `${type} of root ${root}`,
            ).toBe(true);
      }
      // Told apart by root: every event of a's tree carries a's id, and its path starts there.
      const all = [...byChannel.values()].flat();
      for (const e of all) expect(e.path.startsWith(e.rootId === a.id ? "a#" : "b#")).toBe(true);
      const wait = byChannel.get(KEEL_CHANNELS.semaphore)!.find((e) => e.type === "semaphore:acquire");
      expect(wait).toMatchObject({ name: expect.stringMatching(/^sem-/), waitedMs: 10, waiting: 0 });
    } finally {
      stop();
    }
  });

  it("publishes the HTTP phases on keel:http", async () => {
    const server = createServer((_req, res) => res.end("ok")).listen(0, "127.0.0.1");
    await new Promise((r) => server.once("listening", r));
    const { port } = server.address() as { port: number };
    const got: KeelEvent[] = [];
    const fn = (m: unknown) => got.push(m as KeelEvent);
    subscribe(KEEL_CHANNELS.http, fn);
    try {
      const root = run(function* () {
        const client = yield* createHttpClient({ baseUrl: `http://127.0.0.1:${port}` });
        const res = yield* client.get("/x");
        return yield* res.text();
      });
      expect(await root).toBe("ok");
      expect(got.map((e) => e.type)).toEqual(["http:request", "http:connect", "http:headers", "http:body"]);
      expect(got.every((e) => e.rootId === root.id)).toBe(true);
    } finally {
      unsubscribe(KEEL_CHANNELS.http, fn);
      server.close();
    }
  });

  it("lets an http:request subscriber add a header to that attempt only, while it is delivered", async () => {
    const received: (string | undefined)[] = [];
    const server = createServer((req, res) => {
      received.push(req.headers["x-trace"] as string | undefined);
      res.end("ok");
    }).listen(0, "127.0.0.1");
    await new Promise((r) => server.once("listening", r));
    const { port } = server.address() as { port: number };
    let n = 0;
    let late: ((name: string, value: string) => void) | null = null;
    const fn = (m: unknown) => {
      const e = m as KeelEvent;
      if (e.type !== "http:request") return;
      e.setHeader("X-Trace", `t${++n}`);
      late = e.setHeader;
    };
    subscribe(KEEL_CHANNELS.http, fn);
    try {
      await run(function* () {
        const client = yield* createHttpClient({ baseUrl: `http://127.0.0.1:${port}`, headers: { a: "b" } });
        yield* (yield* client.get("/1")).text();
        yield* (yield* client.get("/2")).text();
      });
    } finally {
      unsubscribe(KEEL_CHANNELS.http, fn);
      server.close();
    }
    expect(received).toEqual(["t1", "t2"]);
    expect(() => late!("x-late", "1")).toThrow(/only while the event is delivered/);
    expect(() => late!(1 as never, "1")).toThrow(TypeError);
  });

  it("reports an attempt that fails before its response as http:error", async () => {
    const probe = createServer().listen(0, "127.0.0.1");
    await new Promise((r) => probe.once("listening", r));
    const { port } = probe.address() as { port: number };
    await new Promise((r) => probe.close(r));
    const got: KeelEvent[] = [];
    const fn = (m: unknown) => got.push(m as KeelEvent);
    subscribe(KEEL_CHANNELS.http, fn);
    try {
      const failed = await run(function* () {
        const client = yield* createHttpClient({ baseUrl: `http://127.0.0.1:${port}`, retry: false });
        yield* client.get("/");
      }).catch((e: unknown) => e);
      expect(got.map((e) => e.type)).toEqual(["http:request", "http:error"]);
      expect(got[1]).toMatchObject({ type: "http:error", error: failed });
    } finally {
      unsubscribe(KEEL_CHANNELS.http, fn);
    }
  });

  it("builds no event while nothing subscribes, and stops after unsubscribe", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const clock = createVirtualClock();
    const probe = run(function* () {}, { clock });
    await probe;
    // Every built event reaches the runtime's `emit`: count the calls.
    const emit = vi.spyOn(Object.getPrototypeOf((probe as unknown as { runtime: object }).runtime), "emit");
    const quiet = () =>
      run(
        function* () {
          yield* spawn(function* child() {
            yield* sleep(1);
          });
          try {
            yield* timeout(5, () => sleep(100));
          } catch {}
        },
        { clock },
      );
    expect(channelsActive).toBe(false);
    await quiet();
    expect(emit).not.toHaveBeenCalled();

    const seen: KeelEvent[] = [];
    const fn = (m: unknown) => seen.push(m as KeelEvent);
    channel(KEEL_CHANNELS.task).subscribe(fn);
    const second = (m: unknown) => seen.push(m as KeelEvent);
    subscribe(KEEL_CHANNELS.task, second);
    expect(channelsActive).toBe(true);
    await quiet();
    // Two subscribers, each gets start and settle of both tasks.
    expect(seen.filter((e) => e.type === "task:start")).toHaveLength(4);

    unsubscribe(KEEL_CHANNELS.task, second);
    seen.length = 0;
    await quiet();
    expect(seen.filter((e) => e.type === "task:start")).toHaveLength(2);

    channel(KEEL_CHANNELS.task).unsubscribe(fn);
    expect(channelsActive).toBe(false);
    seen.length = 0;
    emit.mockClear();
    await quiet();
    expect(seen).toEqual([]);
    expect(emit).not.toHaveBeenCalled();
  });

  it("keeps onEvent: it and the channels get the same events", async () => {
    const fromOnEvent: KeelEvent[] = [];
    const fromChannel: KeelEvent[] = [];
    const fn = (m: unknown) => fromChannel.push(m as KeelEvent);
    subscribe(KEEL_CHANNELS.task, fn);
    try {
      await run(
        function* () {
          yield* sleep(1);
        },
        { clock: createVirtualClock(), onEvent: (e) => fromOnEvent.push(e) },
      );
    } finally {
      unsubscribe(KEEL_CHANNELS.task, fn);
    }
    expect(fromChannel).toEqual(fromOnEvent.filter((e) => e.type.startsWith("task:")));
    expect(fromChannel).toHaveLength(2);
  });
});

describe("eventsWanted: whether anyone receives the run's events", () => {
  it("is false with no onEvent and no subscriber, true with either, and follows a channel's subscribers", async () => {
    const noop = () => {};
    const ask = () =>
      run(function* () {
        const inStep = yield* eventsWanted();
        // Driven by hand outside a step, it asks the driver for the task instead.
        const byHand = yield* { [Symbol.iterator]: () => eventsWanted()[Symbol.iterator]() };
        return [inStep, byHand];
      });
    expect(await ask()).toEqual([false, false]);
    expect(await run(eventsWanted, { onEvent: noop })).toBe(true);
    subscribe(KEEL_CHANNELS.worker, noop);
    try {
      expect(await ask()).toEqual([true, true]);
    } finally {
      unsubscribe(KEEL_CHANNELS.worker, noop);
    }
    expect(await ask()).toEqual([false, false]);
  });
});

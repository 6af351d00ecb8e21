import * as core from "@keel/core";
import {
  all,
  call,
  createContext,
  race,
  run,
  scoped,
  shield,
  sleep,
  spawn,
  timeout,
  timeoutAt,
  until,
  useScope,
  withCleanupBudget,
} from "@keel/core";
import * as http from "@keel/core/http";
import { createHarness, createVirtualClock } from "@keel/testing";
import { describe, expect, it } from "vitest";

const op = function* op() {
  return 1;
};

describe("bad input is rejected at the call, naming the parameter and the rule", () => {
  it.each([
    ["timeout(-1)", () => timeout(-1, op), /timeout\(ms\): expected a number ≥ 0.*got -1/],
    ["timeout(NaN)", () => timeout(Number.NaN, op), /timeout\(ms\).*got NaN/],
    ["timeoutAt(NaN)", () => timeoutAt(Number.NaN, op), /timeoutAt\(at\).*got NaN/],
    ["sleep(-1)", () => sleep(-1), /sleep\(ms\).*got -1/],
    ["withCleanupBudget(NaN)", () => withCleanupBudget(Number.NaN, op), /withCleanupBudget\(ms\).*got NaN/],
    ["shield limitMs -5", () => shield(op, { limitMs: -5 }), /limitMs.*got -5/],
    ["shield limitMs Infinity", () => shield(op, { limitMs: Infinity }), /limitMs.*finite.*got Infinity/],
    ["race([])", () => race([]), /race\(ops\): expected at least one operation/],
    ["run budget", () => run(op, { cleanupBudgetMs: -1 }), /cleanupBudgetMs.*got -1/],
  ])("%s is a RangeError", (_name, make, message) => {
    expect(make).toThrow(RangeError);
    expect(make).toThrow(message);
  });

  it.each([
    ["timeout(100, 42)", () => timeout(100, 42 as never), /timeout\(ms, op\): expected an operation.*got 42/],
    ["spawn('x')", () => spawn("x" as never), /spawn\(op\).*got "x"/],
    ["scoped(null)", () => scoped(null as never), /scoped\(op\).*got null/],
    ["all(ops[1])", () => all([op, 5 as never]), /all\(ops\[1\]\).*got 5/],
    ["run(promise)", () => run(Promise.resolve(1) as never), /run\(op\).*until\(promise\)/],
    ["until(3)", () => until(3 as never), /until\(promise\)/],
    ["call(1)", () => call(1 as never), /call\(fn\)/],
    ["context.with(v, 1)", () => createContext("c").with(1, 1 as never), /op/],
  ])("%s is a TypeError", (_name, make, message) => {
    expect(make).toThrow(TypeError);
    expect(make).toThrow(message);
  });

  it("a function that returns a non-operation fails the task with a TypeError and runs nothing else", async () => {
    const h = createHarness();
    await expect(h.run((() => 42) as never)).rejects.toThrow(TypeError);
    await h.expectClean();
  });

  it("spawning into a scope that has finished throws KEEL_SCOPE_CLOSED and never runs the op", async () => {
    const clock = createVirtualClock();
    let ran = false;
    const scope = await run(useScope, { clock });
    expect(scope.closed).toBe(true);
    expect(() =>
      scope.spawn(function* late() {
        ran = true;
      }),
    ).toThrow(expect.objectContaining({ code: "KEEL_SCOPE_CLOSED" }));
    await new Promise((r) => setImmediate(r));
    expect(ran).toBe(false);
  });

  it("an operation driven by hand outside any task throws KEEL_NO_TASK", () => {
    const it = spawn(op)[Symbol.iterator]();
    it.next();
    expect(() => it.next(undefined)).toThrow(expect.objectContaining({ code: "KEEL_NO_TASK" }));
  });
});

/**
 * Every public function of `@keel/core` and `@keel/core/http`, each given bad input: it must throw at
 * the call a `TypeError` or `RangeError` with code `KEEL_INVALID_ARGUMENT` whose message names the
 * parameter as the caller wrote it. The list is walked from the modules' exports, so a new export
 * needs a case here (or a reason, below, why no input can be wrong).
 */
describe("every public entry point checks its input with the same typed errors", () => {
  const noop = function* noop() {};
  const badCalls: Record<string, ReadonlyArray<readonly [() => unknown, RegExp]>> = {
    action: [[() => core.action(5 as never), /^action\(/]],
    all: [[() => core.all("abc" as never), /^all\(ops\)/]],
    allSettled: [[() => core.allSettled("abc" as never), /^allSettled\(ops\)/]],
    evict: [[() => core.evict({} as never, "x"), /^evict\(task\)/]],
    addInspectSection: [
      [() => core.addInspectSection("", () => ({ text: "", data: null })), /^addInspectSection\(title\)/],
      [() => core.addInspectSection("x", 5 as never), /^addInspectSection\(title, render\)/],
    ],
    whenDrained: [[() => core.whenDrained(5 as never), /^whenDrained\(fn\)/]],
    spawnEvictable: [
      [() => core.spawnEvictable(5 as never), /^spawnEvictable\(op\)/],
      [() => core.spawnEvictable(noop, null as never), /^spawnEvictable\(op, options\)/],
    ],
    guardWaits: [
      [() => core.guardWaits({} as never, noop), /^guardWaits\(guard\)/],
      [() => core.guardWaits(null, 5 as never), /^guardWaits\(op\)/],
    ],
    emitEvent: [
      [() => core.emitEvent({ type: "task:start" } as never), /^emitEvent\(event\)/],
      [() => core.emitEvent(null as never), /^emitEvent\(event\)/],
    ],
    call: [[() => core.call(1 as never), /^call\(fn\)/]],
    constant: [[() => core.constant(-1), /^constant\(ms\)/]],
    createChannel: [
      [() => core.createChannel(5 as never), /^createChannel\(/],
      [() => core.createChannel({ capacity: -1 }), /capacity/],
    ],
    createCircuitBreaker: [[() => core.createCircuitBreaker(5 as never), /^createCircuitBreaker\(/]],
    createContext: [
      [() => core.createContext(5 as never), /^createContext\(name\): expected a string, got 5/],
    ],
    createRateLimiter: [[() => core.createRateLimiter(5 as never), /^createRateLimiter\(/]],
    createSemaphore: [
      [() => core.createSemaphore(Number.NaN), /^createSemaphore\(permits\)/],
      [() => core.createSemaphore(2, 5 as never), /^createSemaphore\(permits, options\): .*got 5/],
      [() => core.createSemaphore(2, { name: 5 as never }), /^createSemaphore\(permits, \{ name \}\)/],
    ],
    exponential: [[() => core.exponential(5 as never), /^exponential\(/]],
    feed: [
      [() => core.feed(5 as never, []), /^feed\(channel\)/],
      [() => core.feed(core.createChannel({ capacity: 1 }), 5 as never), /^feed\(channel, items\)/],
    ],
    forEachLimit: [[() => core.forEachLimit([1], 0, noop as never), /^forEachLimit\(/]],
    formatTaskTree: [[() => core.formatTaskTree(5 as never), /^formatTaskTree\(snapshot\): .*got 5/]],
    fromDelays: [
      [() => core.fromDelays(5 as never), /^fromDelays\(/],
      [() => core.fromDelays([-1]), /^fromDelays\(/],
    ],
    main: [
      [() => core.main(noop, Number.NaN as never), /^main\(op, options\): expected an object, got NaN/],
      [() => core.main(noop, { clock: 5 as never }), /^main\(op, \{ clock \}\)/],
      [() => core.main(noop, { blockedStepMs: -1 }), /^main\(op, \{ blockedStepMs \}\)/],
      [() => core.main(noop, { inspect: "yes" as never }), /^main\(op, \{ inspect \}\): expected a boolean/],
      [() => core.main(noop, { logger: 5 as never }), /^main\(op, \{ logger \}\): expected a function/],
    ],
    mapLimit: [
      [() => core.mapLimit(5 as never, 2, noop as never), /^mapLimit\(/],
      [() => core.mapLimit([1], Number.NaN, noop as never), /^mapLimit\(.*limit/],
      [() => core.mapLimit([1], 2, 5 as never), /^mapLimit\(.*fn/],
    ],
    mapLimitSettled: [[() => core.mapLimitSettled([1], -1, noop as never), /^mapLimitSettled\(/]],
    pinoLogger: [
      [
        () => core.pinoLogger({ warn() {} } as never),
        /^pinoLogger\(pino\): expected an object with warn, info and debug/,
      ],
    ],
    race: [[() => core.race("abc" as never), /^race\(ops\)/]],
    resource: [[() => core.resource(5 as never), /^resource\(/]],
    retry: [
      [
        () => core.retry(noop, Number.NaN as never),
        /^retry\(op, policy\): expected a RetryPolicy object, got NaN/,
      ],
      [() => core.retry(noop, "abc" as never), /^retry\(op, policy\)/],
      [() => core.retry(noop, { attempts: 0 }), /^retry\(op, \{ attempts \}\)/],
      [() => core.retry(noop, { backoff: null as never }), /^retry\(op, \{ backoff \}\)/],
    ],
    run: [
      [
        () => core.run(noop, { onEvent: 42 as never }),
        /^run\(op, \{ onEvent \}\): expected a function, got 42/,
      ],
      [() => core.run(noop, Number.NaN as never), /^run\(op, options\): expected an object, got NaN/],
      [
        () => core.run(noop, { name: Symbol("x") as never }),
        /^run\(op, \{ name \}\): expected a string, got Symbol\(x\)/,
      ],
      [
        () => core.run(noop, { warnNoDeadline: 1 as never }),
        /^run\(op, \{ warnNoDeadline \}\): expected a boolean, got 1/,
      ],
      [
        () => core.run(noop, { logEvents: "warn" as never }),
        /^run\(op, \{ logEvents \}\): expected true, false, "debug" or "info"/,
      ],
      [
        () => core.run(noop, { signal: "abort" as never }),
        /^run\(op, \{ signal \}\): expected an AbortSignal/,
      ],
      [() => core.run(noop, { clock: {} as never }), /^run\(op, \{ clock \}\)/],
    ],
    scoped: [[() => core.scoped(null as never), /^scoped\(op\)/]],
    shield: [
      [
        () => core.shield(noop, "abc" as never),
        /^shield\(op, options\): expected an options object, got "abc"/,
      ],
      [() => core.shield(noop, { limitMs: "a" as never }), /^shield\(op, \{ limitMs \}\)/],
    ],
    sleep: [[() => core.sleep("a" as never), /^sleep\(ms\)/]],
    spawn: [
      [() => core.spawn("x" as never), /^spawn\(op\)/],
      [() => core.spawn(noop, 5 as never), /^spawn\(op, options\): .*got 5/],
      [() => core.spawn(noop, { name: 5 as never }), /^spawn\(op, \{ name \}\): expected a string, got 5/],
      [
        () => core.spawn(noop, { logFields: "m1" as never }),
        /^spawn\(op, \{ logFields \}\): expected an object/,
      ],
    ],
    timeout: [[() => core.timeout("a" as never, noop), /^timeout\(ms\)/]],
    timeoutAt: [[() => core.timeoutAt(Number.NaN, noop), /^timeoutAt\(at\)/]],
    until: [[() => core.until(3 as never), /^until\(promise\)/]],
    withCleanupBudget: [[() => core.withCleanupBudget("a" as never, noop), /^withCleanupBudget\(ms\)/]],
    withRandom: [[() => core.withRandom(5 as never, noop), /^withRandom\(/]],
    createHttpClient: [
      [
        () => http.createHttpClient("abc" as never),
        /^createHttpClient\(options\): expected an options object, got "abc"/,
      ],
      [
        () => http.createHttpClient({ headers: "abc" as never }),
        /^createHttpClient\(\{ headers \}\): .*got "abc"/,
      ],
      [
        () => http.createHttpClient({ headers: { "x-a": 1 as never } }),
        /^createHttpClient\(\{ headers: \{ "x-a" \} \}\)/,
      ],
      [
        () => http.createHttpClient({ retry: Number.NaN as never }),
        /^createHttpClient\(\{ retry: policy \}\): .*got NaN/,
      ],
      [
        () => http.createHttpClient({ retry: { attempts: 0 } }),
        /^createHttpClient\(\{ retry: \{ attempts \} \}\)/,
      ],
      [
        () => http.createHttpClient({ timeouts: { headersMs: -1 } }),
        /^createHttpClient\(\{ timeouts: \{ headersMs \} \}\): expected a number ≥ 0 \(or Infinity\), got -1$/,
      ],
      [() => http.createHttpClient({ timeouts: 5 as never }), /^createHttpClient\(\{ timeouts \}\)/],
      [() => http.createHttpClient({ keepAlive: 1 as never }), /^createHttpClient\(\{ keepAlive \}\)/],
      [
        () => http.createHttpClient({ deadlineHeader: 1 as never }),
        /^createHttpClient\(\{ deadlineHeader \}\)/,
      ],
      [() => http.createHttpClient({ baseUrl: 5 as never }), /^createHttpClient\(\{ baseUrl \}\)/],
      [() => http.createHttpClient({ connections: 0 }), /^createHttpClient\(\{ connections \}\)/],
      [() => http.createHttpClient({ maxResponseBytes: -1 }), /^createHttpClient\(\{ maxResponseBytes \}\)/],
      [() => http.createHttpClient({ dispatcher: {} as never }), /^createHttpClient\(\{ dispatcher \}\)/],
      [() => http.createHttpClient({ around: 5 as never }), /^createHttpClient\(\{ around \}\)/],
    ],
  };
  /** Exported functions that no input can get wrong, with the reason. */
  const acceptsAnything: Record<string, string> = {
    describeThrown: "describes any value",
    isBrokenCircuitError: "a guard: any value",
    isCancelled: "a guard: any value",
    isDeadlineExceeded: "a guard: any value",
    isHttpError: "a guard: any value",
    isKeelError: "a guard: any value",
    isRetryExhaustedError: "a guard: any value",
    isTaskCancelledError: "a guard: any value",
    isTimeoutError: "a guard: any value",
    isTransient: "a guard: any value",
    parseRetryAfter: "a header parser: a missing or malformed value is ignored (undefined), by contract",
    cleanupBudget: "no arguments",
    createRealClock: "no arguments",
    deadline: "no arguments",
    eventsWanted: "no arguments",
    now: "no arguments",
    logFields: "no arguments",
    random: "no arguments",
    remaining: "no arguments",
    suspend: "no arguments",
    useAbortSignal: "no arguments",
    useTask: "no arguments",
    useClock: "no arguments",
    useScope: "no arguments",
    snapshot: "checked: a bad task is a TypeError (above), and a task is all it takes",
    BodyReleasedError: "an error class, made by Keel",
    BrokenCircuitError: "an error class, made by Keel",
    Cancelled: "the cancellation signal, made by Keel",
    ChannelClosedError: "an error class, made by Keel",
    HttpError: "an error class, made by Keel",
    HttpTimeoutError: "an error class, made by Keel",
    HttpResponseTooLargeError: "an error class, made by Keel",
    KeelError: "the error base class",
    RetryExhaustedError: "an error class, made by Keel",
    TaskCancelledError: "an error class, made by Keel",
    TimeoutError: "an error class, made by Keel",
  };

  it("every exported function has bad-input cases here, or a reason it takes no input that can be wrong", () => {
    const exported = [...Object.entries(core), ...Object.entries(http)]
      .filter(([, value]) => typeof value === "function")
      .map(([name]) => name);
    expect(exported.filter((name) => !(name in badCalls) && !(name in acceptsAnything))).toEqual([]);
    expect(Object.keys(badCalls).filter((name) => !exported.includes(name))).toEqual([]);
  });

  const cases = Object.entries(badCalls).flatMap(([name, calls]) =>
    calls.map(([call, message], i) => [`${name} #${i + 1}`, call, message] as const),
  );
  it.each(cases)("%s throws a typed error naming the parameter", (_name, call, message) => {
    let thrown: unknown = null;
    try {
      const made = call();
      // A task made by mistake must not outlive the test.
      if (made && typeof (made as core.Task<unknown>).cancel === "function")
        (made as core.Task<unknown>).cancel();
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(Error);
    expect([TypeError, RangeError].some((cls) => thrown instanceof cls)).toBe(true);
    expect(thrown).toMatchObject({ code: "KEEL_INVALID_ARGUMENT" });
    expect((thrown as Error).message).toMatch(message);
  });

  it("snapshot of something that is not a task is a TypeError", () => {
    expect(() => core.snapshot(5 as never)).toThrow(
      expect.objectContaining({ code: "KEEL_INVALID_ARGUMENT" }),
    );
  });

  it("task.cancel(Symbol()) is refused at the call, so no awaiter ever gets a TypeError from formatting it", async () => {
    const task = core.run(function* () {
      yield* sleep(10);
      return "done";
    });
    expect(() => task.cancel(Symbol() as never)).toThrow(
      expect.objectContaining({
        name: "TypeError",
        code: "KEEL_INVALID_ARGUMENT",
        message: expect.stringMatching(/^task\.cancel\(message\)/),
      }),
    );
    expect(await task).toBe("done");
  });

  it("a client's request checks its options at the call, naming them", async () => {
    const h = createHarness();
    const messages = await h.run(function* () {
      const client = yield* http.createHttpClient({ baseUrl: "http://127.0.0.1:9" });
      const bad: Array<() => unknown> = [
        () => client.get("/", 5 as never),
        () => client.get("/", { headers: { a: 1 as never } }),
        () => client.get("/", { timeouts: { headersMs: -1 } }),
        () => client.get("/", { retry: { attempts: 0 } }),
        () => client.get("/", { query: { a: {} as never } }),
        () => client.post("/", { body: 5 as never }),
        () => client.get("/", { expect: "2xx" as never }),
        () => client.post("/", { idempotencyKey: 5 as never }),
      ];
      return bad.map((call) => {
        try {
          call();
          return "accepted";
        } catch (e) {
          return `${(e as { code?: string }).code} ${(e as Error).message.split(":")[0]}`;
        }
      });
    });
    expect(messages).toEqual([
      "KEEL_INVALID_ARGUMENT request(path, options)",
      "KEEL_INVALID_ARGUMENT request(path, { headers",
      "KEEL_INVALID_ARGUMENT request(path, { timeouts",
      "KEEL_INVALID_ARGUMENT request(path, { retry",
      "KEEL_INVALID_ARGUMENT request(path, { query",
      "KEEL_INVALID_ARGUMENT request(path, { body })",
      "KEEL_INVALID_ARGUMENT request(path, { expect })",
      "KEEL_INVALID_ARGUMENT request(path, { idempotencyKey })",
    ]);
    await h.expectClean();
  });
});

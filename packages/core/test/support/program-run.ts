/**
 * Runs one random program (`random-program.ts`) on a fresh harness and checks what the contract
 * promises, whatever the program does (semantics §2, §5, §6): the root settles; no task or timer is
 * left; every `finally` ran exactly once (at most once in a run with an abandonment, whose generator
 * is never resumed); every error thrown is the outcome, in its `suppressed` or `cause` (transitively)
 * or reported by an `error:suppressed` event, unless the language dropped it (a `finally` that threw
 * or was cancelled while handling it) or `retry` consumed it; no `TimeoutError` without its
 * `timeout:fire`; and cancel -> settle within {@link settleBoundMs}.
 * @module
 */
import {
  all,
  constant,
  createChannel,
  createSemaphore,
  isCancelled,
  mapLimit,
  type Operation,
  race,
  retry,
  type Semaphore,
  scoped,
  shield,
  sleep,
  spawn,
  suspend,
  type Task,
  TimeoutError,
  timeout,
} from "@keel/core";
import { createHarness, type Harness } from "@keel/testing";
import { type Node, PROGRAM_BUDGET_MS, type Program, type Seq, settleBoundMs } from "./random-program.js";

const NONE = Symbol("none");

/** Runs `program` and returns the broken promises (empty when it behaved). */
export async function checkProgram(program: Program): Promise<string[]> {
  return new ProgramRun(program).execute();
}

/** Hangs and swallows its cancellation: once (then hangs again), or (`loop`) every time. */
function* swallower(loop: boolean): Generator<unknown, void, unknown> {
  do {
    try {
      yield* suspend();
    } catch {}
  } while (loop);
  yield* suspend();
}

/** Hangs; its `finally` enters a shield on the next level (`depth` of them), a swallower last. */
function* shieldChain(
  depth: number,
  limitMs: number,
  innerLimitMs: number,
  loop: boolean,
): Generator<unknown, void, unknown> {
  try {
    yield* suspend();
  } finally {
    yield* shield(
      () => (depth > 1 ? shieldChain(depth - 1, innerLimitMs, innerLimitMs, loop) : swallower(loop)),
      {
        limitMs,
      },
    );
  }
}

class ProgramRun {
  readonly h: Harness = createHarness();
  private readonly sem: Semaphore = createSemaphore(2, { name: "sem" });
  private readonly thrown = new Map<unknown, string>();
  private readonly dropped = new Set<unknown>();
  private readonly retried = new Set<unknown>();
  /** Every error the program's own catches saw. */
  private readonly caught: unknown[] = [];
  /** One entry per `try` entered: how many times its `finally` began, and the error it handled. */
  private readonly finallies: Array<{ id: string; runs: number; finished: boolean; pending: unknown }> = [];

  constructor(readonly program: Program) {}

  async execute(): Promise<string[]> {
    const { h, program } = this;
    const root = h.run(this.named("root", program.body), {
      name: "root",
      cleanupBudgetMs: PROGRAM_BUDGET_MS,
    });
    let outcome: { ok: boolean; error?: unknown } | null = null;
    root.then(
      () => (outcome = { ok: true }),
      (error) => (outcome = { ok: false, error }),
    );
    let cancelledAt: number | null = null;
    const cancel = () => {
      if (outcome || cancelledAt !== null) return;
      cancelledAt = h.clock.now();
      void root.cancel("random cancel");
    };
    const disarm = program.cancelAt === null ? null : h.clock.schedule(program.cancelAt, cancel);
    const bound = settleBoundMs(program);
    const problems: string[] = [];
    for (let idle = 0; !outcome; ) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      idle = h.clock.pendingTimers === 0 ? idle + 1 : 0;
      // A program that waits forever and is never cancelled from outside is cancelled once idle.
      if (idle > 20 && cancelledAt === null) {
        cancel();
        idle = 0;
      } else if (idle > 20 || h.clock.now() > (cancelledAt ?? 0) + bound + 10_000) {
        problems.push(`the root never settled (now ${h.clock.now()}, cancelled at ${cancelledAt})`);
        return problems;
      }
    }
    disarm?.();
    const settledAt = h.eventsOf("task:settle").find((e) => e.taskId === root.id)?.at ?? h.clock.now();
    try {
      await h.expectClean();
    } catch (e) {
      problems.push(`left behind: ${(e as Error).message}`);
    }
    if (cancelledAt !== null && settledAt - cancelledAt > bound)
      problems.push(`cancel at ${cancelledAt} -> settle at ${settledAt}: more than the bound ${bound} ms`);
    const o = outcome as { ok: boolean; error?: unknown };
    if (!o.ok && isCancelled(o.error)) problems.push("the awaiter got Cancelled");
    this.checkFinallies(problems);
    this.checkErrors(o, problems);
    return problems;
  }

  private checkFinallies(problems: string[]): void {
    const abandoned = this.h.eventsOf("cleanup:abandon").length > 0;
    for (const f of this.finallies) {
      // Abandoned in the middle of its finally: the error it handled is held by a generator that is
      // never resumed again (semantics §5), out of any runtime's reach, as a language drop is.
      if (f.runs === 1 && !f.finished && abandoned) this.dropped.add(f.pending);
      if (f.runs > 1) problems.push(`the finally of ${f.id} ran ${f.runs} times`);
      else if (f.runs === 0 && !abandoned) problems.push(`the finally of ${f.id} never ran`);
    }
  }

  private checkErrors(o: { ok: boolean; error?: unknown }, problems: string[]): void {
    const reached = new Set<unknown>();
    const reach = (e: unknown) => {
      if (e === null || typeof e !== "object" || reached.has(e)) return;
      reached.add(e);
      for (const s of ((e as { suppressed?: unknown[] }).suppressed ?? []) as unknown[]) reach(s);
      reach((e as { cause?: unknown }).cause);
    };
    if (!o.ok) reach(o.error);
    const reported = new Set<unknown>();
    for (const e of this.h.eventsOf("error:suppressed")) reported.add(e.error);
    for (const [error, id] of this.thrown) {
      if (reached.has(error) || reported.has(error) || this.dropped.has(error) || this.retried.has(error))
        continue;
      problems.push(`the error thrown by ${id} is neither the outcome, in its suppressed, nor reported`);
    }
    const fires = this.h.eventsOf("timeout:fire").map((e) => `${e.scope.label}@${e.deadline}`);
    const timeouts = [...reached, ...reported, ...this.caught].filter((e) => e instanceof TimeoutError);
    for (const e of new Set(timeouts) as Set<TimeoutError>) {
      // A spent budget (a deadline already past at entry) throws without firing: no event is due.
      if (e.timeoutMs === 0 || fires.includes(`${e.label}@${e.deadline}`)) continue;
      problems.push(`a TimeoutError (${e.label}, deadline ${e.deadline}) without its timeout:fire`);
    }
  }

  private named(name: string, body: Seq): () => Operation<void> {
    const run = this;
    const holder = {
      *[name]() {
        yield* run.seq(body);
      },
    };
    return holder[name]!;
  }

  private op(body: Seq): Operation<void> {
    return { [Symbol.iterator]: () => this.seq(body) };
  }

  private *seq(body: Seq): Generator<unknown, void, unknown> {
    const spawned: Task<unknown>[] = [];
    for (const n of body) yield* this.node(n, spawned);
  }

  private note(e: unknown): void {
    this.caught.push(e);
  }

  private *node(n: Node, spawned: Task<unknown>[]): Generator<unknown, void, unknown> {
    switch (n.kind) {
      case "sleep":
        return yield* sleep(n.ms);
      case "hang":
        return yield* suspend();
      case "throw": {
        const e = new Error(`thrown by ${n.id}`);
        this.thrown.set(e, n.id);
        throw e;
      }
      case "cancelLast":
        yield* sleep(n.delayMs);
        void spawned.at(-1)?.cancel();
        return;
      case "spawn": {
        const t = yield* spawn(this.named(n.id, n.body));
        spawned.push(t);
        if (n.join) yield* t;
        return;
      }
      case "scoped":
        return yield* scoped(() => this.op(n.body));
      case "all":
        yield* all(n.branches.map((b) => () => this.op(b)));
        return;
      case "race":
        yield* race(n.branches.map((b) => () => this.op(b)));
        return;
      case "timeout":
        return yield* timeout(n.ms, () => this.op(n.body));
      case "shield":
        return yield* shield(() => this.op(n.body), { limitMs: n.limitMs });
      case "retry":
        return yield* retry(() => this.op(n.body), {
          attempts: n.attempts,
          backoff: constant(5),
          retryOn: (e) => {
            this.retried.add(e);
            return true;
          },
        });
      case "semaphore":
        return yield* this.sem.use(() => this.op(n.body));
      case "channel":
        return yield* this.channel(n.items, n.body);
      case "mapLimit":
        yield* mapLimit(
          Array.from({ length: n.items }, (_, i) => i),
          n.limit,
          () => this.op(n.body),
        );
        return;
      case "finally":
        return yield* this.tryFinally(n.id, n.body, n.fin);
      case "swallow":
        return yield* this.swallow(n.loop, n.body);
      case "swarm":
        for (let i = 0; i < n.count; i++) yield* spawn(() => swallower(n.loop));
        return;
      case "shieldChain":
        return yield* shieldChain(n.depth, n.limitMs, n.innerLimitMs, n.loop);
    }
  }

  private *channel(items: number, body: Seq): Generator<unknown, void, unknown> {
    const ch = createChannel<number>({ capacity: 1 });
    yield* scoped(function* consumer(this: void) {
      yield* spawn(function* producer() {
        for (let i = 0; i < items; i++) yield* ch.send(i);
        ch.close();
      });
      for (;;) {
        const r = yield* ch.next();
        if (r.done) return;
        yield* run.seq(body);
      }
    });
    const run = this;
  }

  private *tryFinally(id: string, body: Seq, fin: Seq): Generator<unknown, void, unknown> {
    const record = { id, runs: 0, finished: false, pending: NONE as unknown };
    this.finallies.push(record);
    try {
      yield* this.seq(body);
    } catch (e) {
      this.note(e);
      record.pending = e;
      throw e;
    } finally {
      record.runs++;
      try {
        yield* this.seq(fin);
      } catch (f) {
        this.note(f);
        // The language drops the error being handled when the finally exits by a throw.
        const pending = record.pending;
        if (pending !== NONE && f !== pending && !isCancelled(pending)) this.dropped.add(pending);
        // biome-ignore lint/correctness/noUnsafeFinally: the replacing throw is the fault under test.
        throw f;
      } finally {
        record.finished = true;
      }
    }
  }

  private *swallow(loop: boolean, body: Seq): Generator<unknown, void, unknown> {
    do {
      try {
        yield* this.seq(body);
        return;
      } catch (e) {
        this.note(e);
        if (!isCancelled(e)) throw e;
      }
    } while (loop);
  }
}

/**
 * Property tests of the kernel: random trees of spawn, sleep, timeout, cancel, throw, finally with a
 * suspending cleanup, scoped, all, race, shield and (rarely) a catch that swallows `Cancelled`, each
 * run on the harness's virtual clock (autojump) with a cleanup budget of {@link CLEANUP_BUDGET_MS}.
 * The trees and their generator are in `support/random-tree.ts`; this file interprets and checks.
 *
 * Seedable: `KEEL_PROPERTY_SEED=<n>` replays a run (fast-check prints the seed and path of a failure),
 * `KEEL_PROPERTY_RUNS=<n>` changes the number of trees per property (default 200).
 *
 * Properties (the precise definitions are at each check):
 *  1. no leak: once the root settles, `expectClean()` passes;
 *  2. code after a cancelled `yield*` never runs;
 *  3. the root settles within a bound computed from the tree;
 *  4. the same tree run twice gives the same log and the same events;
 *  5. a tree cancelled at a random instant before it would finish settles `cancelled` or `failed`,
 *     never hangs, and loses nothing: every `finally` that started finished, or was cut within its
 *     budget, and every `Cancelled` user code saw is accounted for by an event.
 */
import {
  all,
  type Cancelled,
  type CancelReason,
  formatTaskTree,
  isCancelled,
  type KeelEvent,
  type Operation,
  race,
  scoped,
  shield,
  sleep,
  snapshot,
  spawn,
  type Task,
  TaskCancelledError,
  TimeoutError,
  timeout,
} from "@keel/core";
import { createHarness, type Harness } from "@keel/testing";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  CLEANUP_BUDGET_MS,
  depthOf,
  printTree,
  type Step,
  type Tree,
  timeBudgetOf,
  treeArbitrary,
} from "./support/random-tree.js";

const seedFromEnv = process.env.KEEL_PROPERTY_SEED;
const SEED = seedFromEnv === undefined ? 20_240_611 : Number(seedFromEnv);
const NUM_RUNS = Number(process.env.KEEL_PROPERTY_RUNS ?? 200);

// ---- the interpreter --------------------------------------------------------------------------

/** What the instrumentation knows about one task of the tree (the root, a spawned task, a branch). */
interface TaskTrack {
  /** The task's name, unique in the run: `root`, a step id, or `<step id>.<branch>`. */
  readonly name: string;
  /** The task's own handle, where the tree holds one (root and spawned tasks). */
  readonly handle: () => Task<unknown> | null;
  /** `Cancelled` signals caught (and rethrown) at this task's instrumented suspension points. */
  leafCancels: number;
  /** `Cancelled` signals caught and dropped by `swallow` steps of this task. */
  swallows: number;
  /** Indexes in `h.events` of the cancellation requests this task's own code made against itself. */
  readonly selfRequests: Set<number>;
}

interface FinallyRecord {
  readonly task: string;
  started: boolean;
  ended: boolean;
  /** The reason of the `Cancelled` that interrupted the cleanup's `sleep`, if one did. */
  cut: CancelReason | null;
  /** When the cleanup finished or was cut. */
  endedAt: number | null;
  /**
   * The latest instant the cleanup may end at: when a `Cancelled` is in flight through it, the
   * instant that signal was first seen plus the budget (§5); otherwise unbounded.
   */
  deadline: number;
}

/** Where a step started: what the check at its normal exit compares against. */
interface Entry {
  readonly events: number;
  readonly leafCancels: number;
  readonly swallows: number;
}

interface Outcome {
  readonly state: string;
  readonly settledAt: number;
  readonly log: readonly string[];
  readonly events: readonly string[];
}

type CancelAt = number | "now";

/** One run of one tree on a fresh harness, with its instrumentation. */
class TreeRun {
  readonly h: Harness = createHarness();
  /** Property 2: steps that returned normally from a cancelled `yield*`. */
  readonly afterCancel: string[] = [];
  /** Property 5: `Cancelled` signals that no event accounts for. */
  readonly unaccounted: string[] = [];
  readonly finallies = new Map<string, FinallyRecord>();
  private readonly ids = new Map<string, number>();
  /** When the instrumentation first saw each `Cancelled` (no earlier than its delivery). */
  private readonly firstSeen = new WeakMap<Cancelled, number>();

  constructor(readonly tree: Tree) {}

  /**
   * Runs the tree to the end. `cancelAt`: `"now"` cancels the root before its body starts, a number
   * cancels it at that virtual instant (a timer registered before anything else, so it fires first).
   */
  async execute(cancelAt?: CancelAt): Promise<Outcome> {
    const h = this.h;
    let root: Task<void> | null = null;
    root = h.run(
      this.body("root", this.tree, () => root),
      { name: "root", cleanupBudgetMs: CLEANUP_BUDGET_MS },
    );
    const task = root;
    let disarm: (() => void) | null = null;
    if (cancelAt === "now") void task.cancel("random cancel");
    else if (cancelAt !== undefined)
      disarm = h.clock.schedule(cancelAt, () => {
        void task.cancel("random cancel");
      });
    await this.settleOrHang(task);
    disarm?.();
    const settle = h.eventsOf("task:settle").find((e) => e.taskId === task.id);
    if (!settle) throw new Error(this.report("the root settled without a task:settle event"));
    h.mark(`root ${settle.state}`);
    return { state: settle.state, settledAt: settle.at, log: [...h.log], events: h.events.map(normalize) };
  }

  /** Waits for the root; fails when the runtime goes idle (no timer left) with the root unsettled. */
  private async settleOrHang(task: Task<void>): Promise<void> {
    let settled = false;
    task.then(
      () => (settled = true),
      () => (settled = true),
    );
    for (let idle = 0; !settled; ) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      idle = this.h.clock.pendingTimers === 0 ? idle + 1 : 0;
      if (idle > 20 || this.h.clock.now() > 1_000_000)
        throw new Error(this.report(`the root hangs:\n${formatTaskTree(snapshot(task))}`));
    }
  }

  /** The failure text: the problem, the tree, and the log so far. */
  report(problem: string): string {
    return `${problem}\ntree: ${printTree(this.tree)}\nlog: ${this.h.log.join(" ")}`;
  }

  /** A task body running `steps`, as a generator function named `name` (the task takes that name). */
  private body(name: string, steps: Tree, handle: () => Task<unknown> | null): () => Operation<void> {
    const run = this;
    const named = {
      *[name]() {
        yield* run.seq(run.track(name, handle), steps);
      },
    };
    return named[name]!;
  }

  private track(name: string, handle: () => Task<unknown> | null): TaskTrack {
    return { name, handle, leafCancels: 0, swallows: 0, selfRequests: new Set() };
  }

  /** The id of the task named `name` in this run (names are unique per run). */
  private idOf(name: string): number {
    let id = this.ids.get(name);
    if (id === undefined) {
      const start = this.h.eventsOf("task:start").find((e) => e.name === name);
      if (!start) throw new Error(`no task:start event for ${name}`);
      id = start.taskId;
      this.ids.set(name, id);
    }
    return id;
  }

  private see(c: Cancelled): void {
    if (!this.firstSeen.has(c)) this.firstSeen.set(c, this.h.clock.now());
  }

  private *seq(tt: TaskTrack, steps: Tree): Generator<unknown, void, unknown> {
    const spawned: Task<unknown>[] = [];
    for (const s of steps) yield* this.step(tt, s, spawned);
  }

  /** Runs one step between two markers: `+id` on entry, and `-id` after the check on normal exit. */
  private *step(tt: TaskTrack, s: Step, spawned: Task<unknown>[]): Generator<unknown, void, unknown> {
    const entry: Entry = { events: this.h.events.length, leafCancels: tt.leafCancels, swallows: tt.swallows };
    this.h.mark(`+${s.id}`);
    try {
      yield* this.stepBody(tt, s, spawned);
    } catch (e) {
      if (isCancelled(e)) this.see(e);
      throw e;
    }
    this.checkNotCancelled(tt, s, entry);
    this.h.mark(`-${s.id}`);
  }

  private *stepBody(tt: TaskTrack, s: Step, spawned: Task<unknown>[]): Generator<unknown, void, unknown> {
    switch (s.kind) {
      case "sleep":
        yield* this.leaf(tt, s.id, sleep(s.ms));
        return;
      case "throw":
        throw new Error(`boom ${s.id}`);
      case "cancelSelf": {
        yield* this.leaf(tt, s.id, sleep(s.delayMs));
        const self = tt.handle();
        if (!self) throw new Error(`${s.id}: cancelSelf generated where the task has no handle`);
        const from = this.h.events.length;
        void self.cancel(`self ${s.id}`);
        const id = this.idOf(tt.name);
        for (let i = from; i < this.h.events.length; i++) {
          const e = this.h.events[i]!;
          if (e.type === "cancel:request" && e.taskId === id) tt.selfRequests.add(i);
        }
        return;
      }
      case "cancelSibling": {
        const target = spawned[spawned.length - 1] ?? null;
        const run = this;
        const named = {
          *[s.id]() {
            const ct = run.track(s.id, () => null);
            yield* run.leaf(ct, s.id, sleep(s.delayMs));
            if (target) yield* run.leaf(ct, `${s.id} cancel ${target.name}`, target.cancel(`by ${s.id}`));
          },
        };
        spawned.push(yield* spawn(named[s.id]!, { name: s.id }));
        return;
      }
      case "spawn": {
        let child: Task<void> | null = null;
        child = yield* spawn(
          this.body(s.id, s.body, () => child),
          { name: s.id },
        );
        spawned.push(child);
        if (s.join) yield* this.leaf(tt, `${s.id} join`, child);
        return;
      }
      case "timeout":
        yield* timeout(s.ms, () => this.seq(tt, s.body));
        return;
      case "finally":
        yield* this.tryFinally(tt, s);
        return;
      case "scoped":
        yield* scoped(() => this.seq(tt, s.body));
        return;
      case "all":
        yield* all(s.branches.map((b, i) => this.body(`${s.id}.${i}`, b, () => null)));
        return;
      case "race":
        yield* race(s.branches.map((b, i) => this.body(`${s.id}.${i}`, b, () => null)));
        return;
      case "shield":
        yield* shield(
          this.body(`${s.id}.s`, s.body, () => null),
          { limitMs: s.limitMs },
        );
        return;
      case "swallow":
        try {
          yield* this.seq(tt, s.body);
        } catch (e) {
          if (!isCancelled(e)) throw e;
          this.see(e);
          tt.swallows++;
          this.checkAccounted(tt, e, `swallow ${s.id}`);
          this.h.mark(`swallow ${s.id} ${e.reason.kind}`);
        }
        return;
    }
  }

  /**
   * `try { body } finally { yield* sleep(cleanupMs) }`, recording when the cleanup started and ended.
   * The `catch` only notes what is in flight (and rethrows it), so the `finally` knows whether it
   * runs under a `Cancelled` and therefore under the cleanup budget.
   */
  private *tryFinally(
    tt: TaskTrack,
    s: Extract<Step, { kind: "finally" }>,
  ): Generator<unknown, void, unknown> {
    const rec: FinallyRecord = {
      task: tt.name,
      started: false,
      ended: false,
      cut: null,
      endedAt: null,
      deadline: Infinity,
    };
    this.finallies.set(s.id, rec);
    let inFlight: unknown = null;
    try {
      yield* this.seq(tt, s.body);
    } catch (e) {
      inFlight = e;
      throw e;
    } finally {
      rec.started = true;
      if (isCancelled(inFlight)) {
        this.see(inFlight);
        rec.deadline = this.firstSeen.get(inFlight)! + CLEANUP_BUDGET_MS;
      }
      this.h.mark(`fin+${s.id}`);
      try {
        yield* this.leaf(tt, `fin ${s.id}`, sleep(s.cleanupMs));
        rec.ended = true;
        this.h.mark(`fin-${s.id}`);
      } catch (e) {
        if (isCancelled(e)) rec.cut = e.reason;
        // biome-ignore lint/correctness/noUnsafeFinally: a cut travels on, exactly as the runtime threw it.
        throw e;
      } finally {
        rec.endedAt = this.h.clock.now();
      }
    }
  }

  /** An instrumented suspension point: counts and logs the `Cancelled` thrown at it, and rethrows. */
  private *leaf<T>(tt: TaskTrack, label: string, op: Operation<T>): Generator<unknown, T, unknown> {
    try {
      return yield* op;
    } catch (e) {
      if (isCancelled(e)) {
        this.see(e);
        tt.leafCancels++;
        this.checkAccounted(tt, e, label);
        this.h.mark(`!${label} ${e.reason.kind}`);
      }
      throw e;
    }
  }

  /**
   * Property 2: code after a cancelled `yield*` never runs. This runs right after `yield*` of step S
   * returned normally in task T (just before the `-S` marker). S's `yield*` counts as cancelled when
   *   (a) a `Cancelled` was thrown at one of T's instrumented suspension points during S (a sleep, a
   *       join, a cancel wait, a cleanup sleep), or
   *   (b) T's first cancellation request ever (a `cancel:request` event for T: an outside cancel, a
   *       parent's teardown, a lost race, a timeout of T firing, a failed child of T) arrived during S
   *       and was not made by T's own code (`cancelSelf`): T was then suspended inside S, so the
   *       contract delivers it there, at once at an ordinary suspension point, and at the end of the
   *       wait for a shield (§6) or for a scope's children (a scope never exits before them, §2),
   *   unless a `swallow` step inside S caught a `Cancelled`, which is the one way user code may turn
   *   a cancellation into a normal return.
   * Under the contract a cancelled `yield*` always ends by throwing: `Cancelled` travels through every
   * frame, a scope converts only its own request into its own error (`TimeoutError`, the child's
   * error), which is thrown too, and a cut during cleanup throws a new `Cancelled`. So a normal return
   * here is a frame carrying on past a cancelled `yield*` (the effection #1190 failure).
   */
  private checkNotCancelled(tt: TaskTrack, s: Step, entry: Entry): void {
    if (tt.swallows !== entry.swallows) return;
    if (tt.leafCancels !== entry.leafCancels) {
      this.afterCancel.push(`${tt.name}: ${s.id} returned normally after a Cancelled was thrown inside it`);
      return;
    }
    const id = this.idOf(tt.name);
    const first = this.h.events.findIndex((e) => e.type === "cancel:request" && e.taskId === id);
    if (first >= entry.events && !tt.selfRequests.has(first)) {
      const e = this.h.events[first] as Extract<KeelEvent, { type: "cancel:request" }>;
      this.afterCancel.push(
        `${tt.name}: ${s.id} returned normally at ${this.h.clock.now()} although the task's first ` +
          `cancellation request (${e.reason.kind} at ${e.at}) arrived while it was suspended inside it`,
      );
    }
  }

  /**
   * Nothing is silently lost: every `Cancelled` that user code sees is accounted for by the event
   * stream, as a `cancel:request` for this task carrying that very reason (a shield cut by its
   * caller's budget passes the caller's `cleanup-overrun` reason on to its work this way), or, for a
   * cut of this task's own budget, as a `cleanup:overrun` of this task at the instant of the cut.
   */
  private checkAccounted(tt: TaskTrack, c: Cancelled, where: string): void {
    const id = this.idOf(tt.name);
    const r = c.reason;
    const accounted = this.h.events.some(
      (e) =>
        e.taskId === id &&
        ((e.type === "cancel:request" && e.reason === r) ||
          (e.type === "cleanup:overrun" && r.kind === "cleanup-overrun" && e.at === r.at)),
    );
    if (!accounted)
      this.unaccounted.push(`${tt.name}: ${where} saw Cancelled(${r.kind} at ${r.at}) with no event for it`);
  }
}

/** An event without the run-specific ids (task and scope ids come from global counters). */
function normalize(e: KeelEvent): string {
  const extra =
    "state" in e ? ` ${e.state}` : "reason" in e && e.reason ? ` ${(e.reason as CancelReason).kind}` : "";
  return `${e.at} ${e.type} ${e.path.replace(/#\d+/g, "")}${extra}`;
}

// ---- the checks -------------------------------------------------------------------------------

/** Property 1: after the root settles, no task is live and no timer is pending. */
async function expectNoLeak(run: TreeRun): Promise<void> {
  try {
    await run.h.expectClean();
  } catch (e) {
    throw new Error(run.report(`property 1 (no leak): ${(e as Error).message}`));
  }
}

/**
 * Property 3, the bound. Virtual time moves only by jumping to the next pending timer, so every
 * stretch of time before the root settles lies inside the life (registration to firing or removal)
 * of some pending timer, and the settle time is at most the total length of those lives. The tree's
 * own timers are one per sleep, cancel delay, cleanup sleep, timeout and shield limit (no step runs
 * twice), each living at most its duration: that is `timeBudgetOf(tree)`. The runtime's own timers,
 * a cut when a cleanup budget runs out and an abandonment one budget after the cut, add time only
 * while nothing else is pending, that is while unwinding waits on the budget itself. §5 bounds that:
 * a cancelled task is cut one budget after delivery, its children are cancelled with it (or, when
 * spawned after a swallow, at the latest when it is cut), so a chain of nested tasks adds at most one
 * budget per level of nesting, plus one for the root and one from a cut to an abandonment:
 * (depth + 2) × budget. (With every wait in these trees ending at a timer of the tree, a correct
 * runtime stays within `timeBudgetOf(tree)` alone; the budget term is the contract's allowance.)
 */
function expectBoundedSettle(run: TreeRun, outcome: Outcome): void {
  const bound = timeBudgetOf(run.tree) + (depthOf(run.tree) + 2) * CLEANUP_BUDGET_MS;
  if (outcome.settledAt > bound)
    throw new Error(run.report(`property 3 (bounded settle): settled at ${outcome.settledAt} > ${bound}`));
}

function expectNoCodeAfterCancel(run: TreeRun): void {
  if (run.afterCancel.length > 0)
    throw new Error(run.report(`property 2 (after a cancelled yield*): ${run.afterCancel.join("; ")}`));
}

/**
 * Property 5, nothing lost: every `Cancelled` seen is accounted for by an event, and every cleanup
 * that started either finished or was cut by a `Cancelled`; one that runs under a `Cancelled` ends by
 * the instant that signal was first seen plus the budget (§5: the pending step is cut when the
 * budget runs out, and every later suspension point throws at once).
 */
function expectNothingLost(run: TreeRun): void {
  const lost = [...run.unaccounted];
  for (const [id, f] of run.finallies) {
    if (!f.started) continue;
    if (!f.ended && !f.cut) lost.push(`${f.task}: the finally of ${id} started and never ended`);
    else if (f.endedAt! > f.deadline)
      lost.push(`${f.task}: the finally of ${id} ran until ${f.endedAt}, past its budget (${f.deadline})`);
  }
  if (lost.length > 0) throw new Error(run.report(`property 5 (nothing lost): ${lost.join("; ")}`));
}

// ---- the properties ---------------------------------------------------------------------------

/** A cancellation instant: before the body starts, or a fraction (in ‰) of the tree's natural run. */
const cancelArbitrary = fc.oneof(
  { weight: 1, arbitrary: fc.constant("now" as const) },
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 999 }) },
);

/** Turns a drawn cancellation into an instant strictly before the root would settle on its own. */
async function cancelInstant(tree: Tree, drawn: number | "now"): Promise<CancelAt> {
  if (drawn === "now") return "now";
  const natural = await new TreeRun(tree).execute();
  return natural.settledAt === 0 ? "now" : Math.floor((natural.settledAt * drawn) / 1000);
}

const options = { numRuns: NUM_RUNS, seed: SEED };

describe("kernel properties on random operation trees", () => {
  it("a random tree leaks no task or timer, settles within its time bound, and replays identically", async () => {
    await fc.assert(
      fc.asyncProperty(treeArbitrary(), async (tree) => {
        const first = new TreeRun(tree);
        const a = await first.execute();
        await expectNoLeak(first);
        expectBoundedSettle(first, a);
        const second = new TreeRun(tree);
        const b = await second.execute();
        expect(b.log, first.report("property 4 (determinism): the second run's log differs")).toEqual(a.log);
        expect(b.events, first.report("property 4 (determinism): the second run's events differ")).toEqual(
          a.events,
        );
        await expectNoLeak(second);
      }),
      options,
    );
  });

  it("code after a cancelled yield* never runs in a random tree, cancelled from outside or not", async () => {
    await fc.assert(
      fc.asyncProperty(treeArbitrary(), fc.option(cancelArbitrary), async (tree, drawn) => {
        const run = new TreeRun(tree);
        await run.execute(drawn === null ? undefined : await cancelInstant(tree, drawn));
        expectNoCodeAfterCancel(run);
        await expectNoLeak(run);
      }),
      options,
    );
  });

  it("a random tree cancelled at a random instant settles cancelled or failed, and every started finally ends in time or is cut", async () => {
    await fc.assert(
      fc.asyncProperty(treeArbitrary(), cancelArbitrary, async (tree, drawn) => {
        const at = await cancelInstant(tree, drawn);
        const run = new TreeRun(tree);
        const outcome = await run.execute(at);
        expect(
          ["cancelled", "failed"],
          run.report(`property 5: cancelled at ${at}, the root ended ${outcome.state}`),
        ).toContain(outcome.state);
        expectNothingLost(run);
        expectBoundedSettle(run, outcome);
        await expectNoLeak(run);
      }),
      options,
    );
  });
});

/**
 * The minimal cases fast-check shrank property 2's failures to, written out. A scope that has settled
 * waits for its children without taking delivery (`exitFrame` waits at an `interruptible: "never"`
 * point); a request counted during that wait must still make `yield*` of the scope throw.
 */
describe("property 2, shrunk: a scope waiting for its children at exit", () => {
  it("a race still waiting for its loser's cleanup when its timeout fires throws TimeoutError instead of returning", async () => {
    const h = createHarness();
    const task = h.run(function* root() {
      yield* timeout(1, function* body() {
        yield* race([
          function* loser() {
            try {
              yield* sleep(0);
            } finally {
              yield* sleep(1);
              h.mark("loser cleaned up");
            }
          },
          function* winner() {},
        ]);
        h.mark("after race");
      });
    });

    await expect(task).rejects.toBeInstanceOf(TimeoutError);
    expect(h.log).toEqual(["loser cleaned up@1"]);
    await h.expectClean();
  });

  it("a scope still waiting for a child's cleanup when its task is cancelled throws Cancelled instead of returning", async () => {
    const h = createHarness();
    const task = h.run(function* root() {
      yield* scoped(function* body() {
        yield* spawn(function* child() {
          try {
            yield* sleep(1000);
          } finally {
            yield* sleep(50);
            h.mark("child cleaned up");
          }
        });
        yield* sleep(0);
      });
      h.mark("after scoped");
      yield* sleep(1);
    });
    h.clock.schedule(10, () => void task.cancel());

    await expect(task).rejects.toBeInstanceOf(TaskCancelledError);
    expect(h.log).toEqual(["child cleaned up@50"]);
    await h.expectClean();
  });
});

/**
 * An incarnation: one claim's run of an execution's body, from its start (replaying what the
 * journal holds) until it ends, parks, is handed back at a shutdown, or loses its claim.
 *
 * Invariants:
 * - An entry is consumed at most once; `unconsumed` holds the journal's keys this run has not
 *   reached yet, in journal order. While it is not empty the run is replaying, and new work (a step
 *   that must run, a sleep that must be journaled) is held until the replay settles (`check`, on a
 *   zero-delay timer, runs only once every replayed wait has resolved): then either every entry was
 *   reached, and the held work goes on, or one was not, and the execution fails with a
 *   `NonDeterminismError` naming both (rule W4). A run that replays nothing pays none of this.
 * - A stop (a cancel request, the deadline) found while replaying is delivered where the replay
 *   ends, never in its middle, so the body's `finally` blocks run at the same point on every replay
 *   and their compensation steps find their own entries (rule W11).
 * - Once `state` leaves `running`, no wait of the body is resolved again and nothing more is
 *   written: the body is evicted (no `finally` of it runs in this process).
 * @module
 */
import { type Clock, evict, type Task, type WaitGuard, type WaitInfo } from "@keel/core";
import type { Workflow } from "./definition.js";
import { DurableWait, isDurableWait } from "./durable-wait.js";
import { NonDeterminismError, NonDurableWaitError } from "./errors.js";
import { type Held, LiveWaits } from "./live-waits.js";
import { ReplayOrder } from "./replay-order.js";
import type {
  ExecutionRecord,
  JournalEntry,
  Lease,
  Park,
  SignalRecord,
  WorkflowStore,
} from "./store/store.js";
import { storeCall } from "./store-call.js";

export type IncarnationState = "running" | "parking" | "parked" | "lost" | "shutdown";

export interface IncarnationInit {
  readonly record: ExecutionRecord;
  readonly journal: readonly JournalEntry[];
  readonly signals: readonly SignalRecord[];
  readonly definition: Workflow<unknown, unknown>;
  readonly store: WorkflowStore;
  readonly clock: Clock;
  readonly lease: Lease;
  /** A quiet body parks when its next wake is at least this far away. */
  readonly parkAfterMs: number;
  /** The bound on each store call (see `store-call.ts`). */
  readonly storeTimeoutMs: number;
  /** Told of each change people may want to see (`workflow:*` events, the engine's counters). */
  readonly onPark?: (park: Park) => void;
}

export class Incarnation {
  readonly record: ExecutionRecord;
  readonly definition: Workflow<unknown, unknown>;
  readonly store: WorkflowStore;
  readonly clock: Clock;
  readonly lease: Lease;
  state: IncarnationState = "running";
  /** The body's task, once started. */
  body: Task<unknown> | null = null;
  /** A failure that decides the outcome whatever the body does (non-determinism, a lost store). */
  fatal: unknown = null;
  /** The stop to deliver (rule W11); `stopDelivered` once the body has been cancelled for it. */
  stop: { readonly kind: "cancel" | "deadline"; readonly message: string } | null = null;
  stopDelivered = false;
  readonly waits: LiveWaits;
  /** Steps in flight: tasks this incarnation spawned and has not journaled. */
  readonly steps = new Set<Task<unknown>>();
  /** Resolved with the park's write (or its failure), for the runner to wait on. */
  parked: Promise<void> | null = null;
  /** What the parked body waits on (read before its eviction, which ends its waits). */
  parkedOn: string | null = null;

  private readonly journal = new Map<string, JournalEntry>();
  private readonly order: ReplayOrder;
  private readonly unconsumed = new Set<string>();
  private readonly paths = new WeakMap<object, string>();
  private readonly spawnedBy = new WeakMap<object, number>();
  private readonly counts = new Map<string, number>();
  private readonly held = new Set<Held>();
  private checkScheduled = false;
  /** Set by a step just before it spawns its task (see `guard.spawned`). */
  spawningStep = false;
  private readonly parkAfterMs: number;
  private readonly storeTimeoutMs: number;

  constructor(init: IncarnationInit) {
    this.record = init.record;
    this.definition = init.definition;
    this.store = init.store;
    this.clock = init.clock;
    this.lease = init.lease;
    this.parkAfterMs = init.parkAfterMs;
    this.storeTimeoutMs = init.storeTimeoutMs;
    for (const e of init.journal) {
      this.journal.set(e.key, e);
      this.unconsumed.add(e.key);
    }
    this.waits = new LiveWaits(this, init.signals, init.journal);
    this.order = new ReplayOrder(init.journal);
  }

  get id(): string {
    return this.record.id;
  }

  /** The body's wait guard: durable waits pass, any other is refused (rule W5); spawns get paths. */
  readonly guard: WaitGuard = {
    check: (wait: WaitInfo) =>
      isDurableWait(wait) ? undefined : new NonDurableWaitError(this.definition.name, wait.description),
    spawned: (child, parent) => {
      // A step's own task is not a branch: a replayed step spawns none, so counting it would shift
      // the paths of the branches spawned after it between a first run and a replay.
      if (this.spawningStep) {
        this.spawningStep = false;
        return;
      }
      if (parent === null) return;
      const at = this.paths.get(parent) ?? "";
      const n = this.spawnedBy.get(parent) ?? 0;
      this.spawnedBy.set(parent, n + 1);
      this.paths.set(child, at === "" ? `${n}` : `${at}.${n}`);
    },
  };

  /**
   * The key of the next entry of `kind` and `name` asked by `task` (rule W3): its branch's path
   * (where it was spawned in the body, in spawn order) and its occurrence there.
   */
  key(kind: JournalEntry["kind"], task: Task<unknown>, name: string): string {
    const path = this.paths.get(task) ?? "";
    const base = `${kind}:${path === "" ? "" : `${path}/`}${name}`;
    const n = (this.counts.get(base) ?? 0) + 1;
    this.counts.set(base, n);
    return `${base}#${n}`;
  }

  /**
   * The journal's entry for `key`, consumed and given in the journal's order (see `replay-order.ts`);
   * undefined at once when the journal has none.
   */
  *take(key: string): Generator<unknown, JournalEntry | undefined, unknown> {
    const entry = this.journal.get(key);
    if (entry === undefined || !this.unconsumed.delete(key)) return entry;
    if (this.unconsumed.size === 0 && this.stop) this.checkSoon();
    yield* new DurableWait<void>(`replaying ${key}`, (resolve) => {
      this.checkSoon();
      return this.order.ask(key, (error) =>
        resolve(error === null ? { ok: true, value: undefined } : { ok: false, error }),
      );
    });
    return entry;
  }

  /** An entry this run wrote and may be asked again (a `patched` id asked twice). */
  answered(key: string): JournalEntry | undefined {
    return this.unconsumed.has(key) ? undefined : this.journal.get(key);
  }

  /** Keeps an entry this run is writing, for {@link answered}. */
  remember(entry: JournalEntry): void {
    this.journal.set(entry.key, entry);
  }

  /** True while journal entries remain that this run has not reached. */
  get replaying(): boolean {
    return this.unconsumed.size > 0;
  }

  /**
   * True when new work may start at once: every entry asked and given (a racer whose rival's
   * outcome is still to be given must not start its own step yet), no stop waiting to be delivered.
   */
  get freeToRun(): boolean {
    return (
      this.fatal === null &&
      this.unconsumed.size === 0 &&
      this.order.waitingCount === 0 &&
      (this.stop === null || this.stopDelivered)
    );
  }

  /** Holds new work until the replay settles (see the module's invariants). */
  hold(entry: Held): () => void {
    this.held.add(entry);
    this.checkSoon();
    return () => this.held.delete(entry);
  }

  /** Asks for the body to be stopped (rule W11): at once, or where the replay ends. */
  requestStop(kind: "cancel" | "deadline", message: string): void {
    if (this.stop !== null) return;
    this.stop = { kind, message };
    this.checkSoon();
  }

  /**
   * A step's outcome is journaled: a check only when one can come of it (a held wait, a stop to
   * deliver, live waits that may now park), not a zero-delay timer after every step.
   */
  stepEnded(): void {
    if (this.held.size > 0 || this.waits.size > 0 || (this.stop !== null && !this.stopDelivered))
      this.checkSoon();
  }

  /** Runs {@link check} once the runtime is idle (a zero-delay timer on the engine's clock). */
  checkSoon(): void {
    if (this.checkScheduled || this.state !== "running") return;
    this.checkScheduled = true;
    this.clock.schedule(this.clock.now(), () => {
      this.checkScheduled = false;
      this.check();
    });
  }

  private check(): void {
    if (this.state !== "running" || this.body === null) return;
    if (this.stop !== null && !this.stopDelivered) {
      this.stopDelivered = true;
      this.body.cancel(this.stop.message);
      return;
    }
    const blocked = this.order.blocked();
    if (blocked !== null) {
      // Every branch has run as far as it can, and an entry written before the ones asked was
      // never asked: the body no longer takes the path its journal records (rule W4).
      if (this.fatal === null)
        this.fatal = new NonDeterminismError(this.id, blocked.asked, blocked.unreached);
      this.order.fail(this.fatal);
    }
    if (this.held.size > 0) {
      const held = [...this.held];
      this.held.clear();
      const first = this.unconsumed.values().next();
      if (!first.done && this.fatal === null) {
        // Thrown at the held wait; any later new work is refused with it too, so the body cannot go
        // on past it (its `finally` blocks run, and their new steps are refused as well).
        this.fatal = new NonDeterminismError(this.id, held[0]!.key, first.value);
      }
      for (const h of held) h.release(this.fatal);
      return;
    }
    if (this.steps.size === 0 && this.waits.size > 0 && this.stop === null && this.fatal === null) {
      const dueAt = this.waits.dueAt();
      if (dueAt - this.clock.now() >= this.parkAfterMs) this.park(dueAt);
    }
  }

  /** Parks the quiet body: evicts it and writes the park (rule W6). */
  private park(waitsDueAt: number): void {
    this.state = "parking";
    // A parked execution wakes for its deadline too, to be stopped there (rule W10).
    const deadlineAt = this.record.deadlineAt ?? Number.POSITIVE_INFINITY;
    const dueAt = Math.min(waitsDueAt, deadlineAt);
    const park: Park = {
      status: this.waits.events.length > 0 ? "waiting" : "sleeping",
      wakeAt: Number.isFinite(dueAt) ? dueAt : null,
      waitingFor: this.waits.events,
      waitingOn: this.waits.describe(),
      signalsSeen: this.waits.signalsSeen,
      nowMs: this.clock.now(),
    };
    this.parkedOn = park.waitingOn;
    evict(this.body!, `parked: ${park.waitingOn}`);
    this.parked = this.io("park", () => this.store.park(this.id, this.lease, park)).then(
      () => {
        this.state = "parked";
      },
      (error) => this.lose(error),
    );
  }

  /** Journals `entries` under the claim; a failure to write ends this incarnation (see `lose`). */
  write(entries: readonly JournalEntry[]): Promise<void> {
    return this.io("append", () => this.store.append(this.id, this.lease, entries)).catch((error) => {
      this.lose(error);
      throw error;
    });
  }

  /**
   * Runs a store call, bounded by `storeTimeoutMs`, the clock held meanwhile (see `store-call.ts`).
   */
  io<T>(what: string, call: () => Promise<T>): Promise<T> {
    return storeCall(this.clock, this.store, this.storeTimeoutMs, `${what} ${this.id}`, call);
  }

  /**
   * The claim is lost or the store failed: stop at once, write nothing more. Steps in flight are
   * cancelled (their cleanup runs), then the body is evicted; another process replays it.
   */
  lose(error: unknown): void {
    if (this.state === "lost") return;
    const wasRunning = this.state === "running";
    this.state = "lost";
    if (this.fatal === null) this.fatal = error;
    if (!wasRunning || this.body === null) return;
    const body = this.body;
    const steps = [...this.steps];
    for (const s of steps) s.cancel("the execution's claim was lost");
    void Promise.allSettled(steps).then(() => evict(body, "the execution's claim was lost"));
  }
}

/**
 * `EngineHealth`: whether the worker's engine answers. Every call the worker makes to it is bounded
 * (`engineTimeoutMs`); one that fails or runs past the bound marks it down, once (a `worker:engine`
 * event, a warning by default). While down the slots take nothing, a prober asks the engine for its
 * counts every second, and the first answer marks it up again. Down for longer than `engineDownMs`,
 * the worker fails with `EngineUnavailableError`.
 * @module
 */
import {
  describeThrown,
  emitEvent,
  isCancelled,
  isTimeoutError,
  type Operation,
  sleep,
  timeout,
} from "@keel/core";
import { ChangeSignal } from "./change-signal.js";
import { EngineTimeoutError, EngineUnavailableError } from "./engine-errors.js";
import { Bound } from "./op.js";
import type { Pool } from "./pool.js";

/**
 * The engine's health as `worker.stats()` reads it.
 *
 * @example
 * ```ts
 * import type { EngineHealthReading } from "@keel/worker";
 * const reading: EngineHealthReading = { state: "down", sinceMs: 1200, error: new Error("ECONNREFUSED") };
 * console.log(reading.state); // down
 * ```
 */
export interface EngineHealthReading {
  /** `up`: its calls are answered; `down`: one failed or ran past `engineTimeoutMs`, and no probe has been answered since. */
  readonly state: "up" | "down";
  /** How long it has been in this state (ms; since the worker started while it has always been up). */
  readonly sinceMs: number;
  /** While down: the failure that showed it. */
  readonly error?: unknown;
}

/** Probes at most this often while the engine is down. */
const PROBE_MS = 1_000;

export class EngineHealth<T> {
  // Invariant: `downSince` is set exactly while the state is down; `lastError` is the latest failure
  // seen while down (the cause of `EngineUnavailableError`).
  private downSince: number | null = null;
  private lastError: unknown;
  private changedAt: number;
  private readonly changes: ChangeSignal;

  constructor(readonly pool: Pool<T>) {
    this.changes = new ChangeSignal(pool.clock);
    this.changedAt = pool.clock.now();
  }

  get down(): boolean {
    return this.downSince !== null;
  }

  reading(): EngineHealthReading {
    const sinceMs = this.pool.clock.now() - this.changedAt;
    return this.downSince === null
      ? { state: "up", sinceMs }
      : { state: "down", sinceMs, error: this.lastError };
  }

  /** `op` (a call to the engine named `what`) bounded by `engineTimeoutMs`; a failure marks the engine down and is thrown. */
  call<R>(what: string, op: Operation<R>): Operation<R> {
    return new Bound(callEngine<T, R>, this, what, op);
  }

  /** A call failed or timed out: the engine is down (said once, when it goes down). */
  fault(error: unknown): Operation<void> {
    return new Bound(markDown<T>, this, error, undefined);
  }

  /** A call was answered: the engine is up (said once, when it comes back). */
  answered(): Operation<void> {
    return new Bound(markUp<T>, this, undefined, undefined);
  }

  /** Waits while the engine is down (the slots, before they take), or until `at`. */
  *whenUp(description: string, at = Infinity): Generator<unknown, void, unknown> {
    while (this.downSince !== null && this.pool.clock.now() < at) yield* this.changes.wait(description, at);
  }

  /** The prober: a task of the worker's region for as long as it runs. */
  *probe(): Generator<unknown, never, unknown> {
    const { pool } = this;
    const { engine, config, clock } = pool;
    for (;;) {
      while (this.downSince === null) yield* this.changes.wait(`${engine.name}: watching the engine`);
      yield* sleep(Math.min(PROBE_MS, config.engineTimeoutMs));
      try {
        yield* this.call("a probe (counts)", engine.counts());
      } catch (e) {
        if (isCancelled(e)) throw e;
        const downForMs = clock.now() - (this.downSince ?? clock.now());
        if (downForMs >= config.engineDownMs)
          pool.fail(new EngineUnavailableError(engine.name, downForMs, { cause: this.lastError }));
      }
    }
  }

  setDown(error: unknown): boolean {
    this.lastError = error;
    if (this.downSince !== null) return false;
    this.downSince = this.changedAt = this.pool.clock.now();
    this.changes.notify();
    return true;
  }

  setUp(): number | null {
    if (this.downSince === null) return null;
    const now = this.pool.clock.now();
    const downForMs = now - this.downSince;
    this.downSince = null;
    this.lastError = undefined;
    this.changedAt = now;
    this.changes.notify();
    return downForMs;
  }
}

function* callEngine<T, R>(
  health: EngineHealth<T>,
  what: string,
  op: Operation<R>,
): Generator<unknown, R, unknown> {
  const { engine, config } = health.pool;
  const label = `${engine.name}: ${what}`;
  let value: R;
  try {
    value = yield* timeout(config.engineTimeoutMs, op, { label });
  } catch (e) {
    if (isCancelled(e)) throw e;
    // Our own bound (its label names this call), not a timeout the engine threw: those pass
    // through `timeout` untouched.
    const own = isTimeoutError(e) && e.label.endsWith(`, ${label})`);
    const error = own ? new EngineTimeoutError(engine.name, what, config.engineTimeoutMs) : e;
    yield* markDown(health, error);
    throw error;
  }
  if (health.down) yield* markUp(health);
  return value;
}

function* markDown<T>(health: EngineHealth<T>, error: unknown): Generator<unknown, void, unknown> {
  if (!health.setDown(error)) return;
  const queue = health.pool.engine.name;
  const message = `queue ${queue}: the engine stopped answering (${describeThrown(error)}); the worker takes no job until it is back`;
  yield* emitEvent({ type: "worker:engine", queue, state: "down", error, message });
}

function* markUp<T>(health: EngineHealth<T>): Generator<unknown, void, unknown> {
  const downForMs = health.setUp();
  if (downForMs === null) return;
  const queue = health.pool.engine.name;
  const message = `queue ${queue}: the engine answers again after ${Math.round(downForMs)} ms; the worker takes jobs again`;
  yield* emitEvent({ type: "worker:engine", queue, state: "up", downForMs, message });
}

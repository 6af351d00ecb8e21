/**
 * What every library under test provides: one function per scenario, written in that library's idiom.
 * @module
 */

/** Counters a suspended task bumps: `started` before it suspends, `finalized` in its `finally`. */
export interface Counters {
  started: number;
  finalized: number;
}

/** Tasks that are all suspended; `cancelAll` resolves once every one of them has run its `finally`. */
export interface Suspended {
  cancelAll(): Promise<void>;
}

export interface Peer {
  /**
   * Spawns `n` children under one parent, then joins each of them in turn; each child is a
   * generator closure made at its spawn (`spawn(function* () { return i })`), as users write it.
   */
  spawnJoin(n: number): Promise<void>;
  /** As `spawnJoin`, with one child body made once and shared (the form for hot loops). */
  spawnJoinShared(n: number): Promise<void>;
  /** Suspends `n` times in sequence, each resumed from a microtask (an already resolved promise). */
  microtasks(n: number): Promise<void>;
  /** Suspends `n` times in sequence, each resumed from `setImmediate` (a macrotask). */
  macrotasks(n: number): Promise<void>;
  /**
   * Starts `n` tasks under one parent, each `try { suspend } finally { counters.finalized++ }`, and
   * bumps `counters.started` as each one reaches its suspension. Returns without waiting for them.
   */
  suspendMany(n: number, counters: Counters): Suspended;
}

/** The libraries compared, Keel first: every ratio is to Keel. */
export const peerIds = ["keel", "keel-contexts", "effection", "effect", "async"] as const;
export type PeerId = (typeof peerIds)[number];

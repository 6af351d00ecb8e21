/**
 * The order a replay answers in: the journal's. A replayed entry is given to the body only once
 * every entry written before it has been given (or its asker has gone), and only after the runtime
 * has drained (every branch that could run has run to its next request). So concurrent branches
 * see their journaled outcomes in the order they first happened, and a race is won on a replay by
 * the racer that won it first (rule W3): answering each request at once would let the branch that
 * asks first win, whatever the journal says.
 *
 * Invariants: `next` is the position of the earliest entry not yet given; positions below it are
 * given or withdrawn; `waiting` holds the asks for positions at or above it. A sequential body asks
 * one entry at a time, so each is given one drain after it is asked (a microtask, no timer).
 * @module
 */
import { whenDrained } from "@keel/core";
import type { JournalEntry } from "./store/store.js";

interface Ask {
  readonly key: string;
  give(error: unknown): void;
}

export class ReplayOrder {
  private readonly position = new Map<string, number>();
  private readonly keys: string[];
  private next = 0;
  private readonly waiting = new Map<number, Ask>();
  /** Positions at or above `next` whose ask has gone (its asker was cancelled or evicted). */
  private readonly gone = new Set<number>();
  private pumping = false;

  constructor(journal: readonly JournalEntry[]) {
    this.keys = journal.map((e) => e.key);
    for (let i = 0; i < journal.length; i++) this.position.set(journal[i]!.key, i);
  }

  get waitingCount(): number {
    return this.waiting.size;
  }

  /**
   * Registers the ask for `key` (an entry of the journal); `give(null)` is called in its turn, or
   * `give(error)` by {@link fail}. Returns the withdrawal, for an asker that leaves first.
   */
  ask(key: string, give: (error: unknown) => void): () => void {
    const at = this.position.get(key)!;
    this.waiting.set(at, { key, give });
    this.pump();
    return () => {
      if (this.waiting.get(at)?.key !== key) return;
      this.waiting.delete(at);
      this.gone.add(at);
      this.pump();
    };
  }

  /** The earliest waiting ask and the entry it waits behind, when the replay cannot go on. */
  blocked(): { readonly asked: string; readonly unreached: string } | null {
    if (this.waiting.size === 0) return null;
    const first = Math.min(...this.waiting.keys());
    return { asked: this.waiting.get(first)!.key, unreached: this.keys[this.next]! };
  }

  /** Fails every waiting ask with `error` (the execution's fatal error). */
  fail(error: unknown): void {
    const asks = [...this.waiting.values()];
    this.waiting.clear();
    for (const a of asks) a.give(error);
  }

  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    whenDrained(() => {
      this.pumping = false;
      while (this.gone.delete(this.next)) this.next++;
      const ask = this.waiting.get(this.next);
      if (ask === undefined) return;
      this.waiting.delete(this.next);
      this.next++;
      ask.give(null);
      // The next one only after what this one woke has run.
      if (this.waiting.size > 0 || this.gone.size > 0) this.pump();
    });
  }
}

/**
 * The body's durable waits in flight in one incarnation (sleeps and events), and the signals it
 * knows of: what a park writes (when it is due, which events it waits for), and how a signal finds
 * its wait (rule W8: the waits for a name take its signals in the order they were sent; a signal a
 * journal entry took is never taken again).
 * @module
 */
import type { Incarnation } from "./incarnation.js";
import type { JournalEntry, SignalRecord } from "./store/store.js";

/** New work held until the replay settles: `release(null)` lets it go, `release(error)` fails it. */
export interface Held {
  readonly key: string;
  release(error: unknown): void;
}

/** A durable wait in flight: a sleep until `dueAt`, or an event (due at its timeout, or never). */
export interface LiveWait {
  readonly kind: "sleep" | "event";
  readonly key: string;
  readonly dueAt: number;
  /** For an event: its name; `offer` is called with each signal of that name not yet taken. */
  readonly name?: string;
  offer?(signal: SignalRecord): boolean;
  readonly description: string;
}

export class LiveWaits {
  private readonly live = new Set<LiveWait>();
  private readonly signals: SignalRecord[];
  private readonly taken = new Set<number>();

  constructor(
    private readonly inc: Incarnation,
    signals: readonly SignalRecord[],
    journal: readonly JournalEntry[],
  ) {
    this.signals = [...signals].sort((a, b) => a.seq - b.seq);
    for (const e of journal) {
      const seq = e.kind === "event" && e.ok ? (e.value as { signal?: unknown } | null)?.signal : undefined;
      if (typeof seq === "number") this.taken.add(seq);
    }
  }

  get size(): number {
    return this.live.size;
  }

  /** The highest signal seq this incarnation has seen (a park names it: see `Park.signalsSeen`). */
  get signalsSeen(): number {
    return this.signals.length === 0 ? 0 : this.signals[this.signals.length - 1]!.seq;
  }

  /** The event names the live waits wait for, each once. */
  get events(): string[] {
    const names = new Set<string>();
    for (const w of this.live) if (w.kind === "event") names.add(w.name!);
    return [...names];
  }

  /** The earliest instant a live wait is due (Infinity for events with no timeout only). */
  dueAt(): number {
    let at = Number.POSITIVE_INFINITY;
    for (const w of this.live) if (w.dueAt < at) at = w.dueAt;
    return at;
  }

  describe(): string {
    return [...this.live].map((w) => w.description).join(", ");
  }

  /** The first signal named `name` no entry or wait has taken; marked taken. */
  takeSignal(name: string): SignalRecord | undefined {
    for (const s of this.signals) {
      if (s.name === name && !this.taken.has(s.seq)) {
        this.taken.add(s.seq);
        return s;
      }
    }
    return undefined;
  }

  add(wait: LiveWait): () => void {
    this.live.add(wait);
    this.inc.checkSoon();
    return () => {
      this.live.delete(wait);
    };
  }

  /** A signal sent while this incarnation runs: kept, and offered to the first wait for its name. */
  received(signal: SignalRecord): void {
    if (this.signals.some((s) => s.seq === signal.seq)) return;
    this.signals.push(signal);
    this.signals.sort((a, b) => a.seq - b.seq);
    for (const w of this.live) {
      if (w.kind === "event" && w.name === signal.name) {
        const s = this.takeSignal(signal.name);
        if (s === undefined) return;
        if (w.offer?.(s)) return;
        this.taken.delete(s.seq);
      }
    }
  }
}

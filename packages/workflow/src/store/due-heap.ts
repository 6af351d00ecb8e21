/**
 * The memory store's index of executions by when they are next due (what the SQL stores' `due_at`
 * index is to them): a binary min-heap of (instant, creation order) with lazy deletion. A row's due
 * instant changes by pushing a new entry and bumping the row's version; an entry whose version is
 * not its row's is stale, and is dropped when it reaches the top (or at a compaction). `claim` and
 * `nextDueAt` then cost O(log N) per due execution instead of a scan of every row: 100,000 parked
 * executions are not read by a claim.
 * @module
 */

/** What the heap orders: a row's due instant, its creation order (ties), and its version then. */
export interface DueEntry<R> {
  readonly at: number;
  readonly order: number;
  readonly version: number;
  readonly row: R;
}

export class DueHeap<R extends { dueVersion: number }> {
  private entries: DueEntry<R>[] = [];

  get size(): number {
    return this.entries.length;
  }

  push(entry: DueEntry<R>): void {
    const a = this.entries;
    a.push(entry);
    let i = a.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(a[i]!, a[parent]!)) break;
      [a[i], a[parent]] = [a[parent]!, a[i]!];
      i = parent;
    }
  }

  /** The earliest current entry, stale ones dropped on the way; undefined when none. */
  peek(): DueEntry<R> | undefined {
    for (;;) {
      const top = this.entries[0];
      if (top === undefined || top.version === top.row.dueVersion) return top;
      this.pop();
    }
  }

  /** Removes and returns the earliest entry, stale or not. */
  pop(): DueEntry<R> | undefined {
    const a = this.entries;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last !== undefined) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && before(a[l]!, a[m]!)) m = l;
        if (r < a.length && before(a[r]!, a[m]!)) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m]!, a[i]!];
        i = m;
      }
    }
    return top;
  }

  /** Drops every stale entry (called when they outnumber the current ones). */
  compact(): void {
    const current = this.entries.filter((e) => e.version === e.row.dueVersion);
    this.entries = [];
    for (const e of current) this.push(e);
  }
}

function before<R>(a: DueEntry<R>, b: DueEntry<R>): boolean {
  return a.at < b.at || (a.at === b.at && a.order < b.order);
}

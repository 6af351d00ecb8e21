/**
 * The in-memory store: for tests and for trying workflows out. It keeps nothing across a restart of
 * the process, so "crash" tests with it replay within one process (`@keel/testing`'s workflow kit).
 * Values are kept as JSON text, so that nothing the engine hands it is shared by reference.
 * @module
 */

import { type DueEntry, DueHeap } from "./due-heap.js";
import {
  type Claimed,
  ENDED_STATUSES,
  type ExecutionRecord,
  type Finish,
  type JournalEntry,
  type JsonValue,
  type Lease,
  type ListFilter,
  type NewExecution,
  type Park,
  type SignalRecord,
  type WorkflowStore,
} from "./store.js";
import { DuplicateEntryError, LeaseLostError } from "./store-errors.js";

interface Row {
  record: ExecutionRecord;
  /** Creation order: ties of due instants go oldest first. */
  readonly order: number;
  /** Bumped when the row's due instant changes: heap entries of other versions are stale. */
  dueVersion: number;
  /** When the row is next due (see `dueAt`), or null: not in the heap. */
  due: number | null;
  /** Journal entries in the order written. */
  journal: JournalEntry[];
  keys: Set<string>;
  signals: SignalRecord[];
}

const copy = <T>(value: T): T => (value === undefined ? value : JSON.parse(JSON.stringify(value)));

/**
 * A {@link WorkflowStore} in the process's memory.
 *
 * @example
 * ```ts
 * import { createMemoryStore } from "@keel/workflow";
 * const store = createMemoryStore();
 * await store.create({ id: "a", workflow: "w", version: 1, input: 1, deadlineAt: null, nowMs: 0 });
 * console.log((await store.get("a"))?.status); // pending
 * ```
 */
export function createMemoryStore(): WorkflowStore {
  const rows = new Map<string, Row>();
  const heap = new DueHeap<Row>();
  let withDue = 0;
  const ended = (r: ExecutionRecord) => ENDED_STATUSES.includes(r.status);
  const current = (id: string, lease: Lease): Row => {
    const row = rows.get(id);
    if (
      !row ||
      row.record.owner !== lease.owner ||
      row.record.generation !== lease.generation ||
      ended(row.record)
    )
      throw new LeaseLostError(id, lease.owner, lease.generation);
    return row;
  };
  const runnable = (r: ExecutionRecord, nowMs: number) => {
    if (ended(r)) return false;
    if (r.owner !== null && r.leaseUntil !== null && r.leaseUntil > nowMs) return false;
    if (r.status === "pending" || r.status === "running" || r.cancelRequested !== null) return true;
    return r.wakeAt !== null && r.wakeAt <= nowMs;
  };
  const dueAt = (r: ExecutionRecord) =>
    r.owner !== null && r.leaseUntil !== null
      ? r.leaseUntil
      : r.status === "pending"
        ? r.updatedAt
        : r.wakeAt;

  /** Keeps the row's place in the heap: a new entry when its due instant changed. */
  const index = (row: Row) => {
    const due = ended(row.record) ? null : dueAt(row.record);
    if (due === row.due) return;
    if (row.due !== null) withDue--;
    row.due = due;
    row.dueVersion++;
    if (due === null) return;
    withDue++;
    heap.push({ at: due, order: row.order, version: row.dueVersion, row });
    if (heap.size > 2 * withDue + 1_024) heap.compact();
  };
  const update = (row: Row, patch: Partial<ExecutionRecord>) => {
    row.record = { ...row.record, ...patch };
    index(row);
  };
  return {
    description: "memory",
    async init() {},
    async close() {},
    async create(e: NewExecution) {
      const existing = rows.get(e.id);
      if (existing) return { created: false, record: copy(existing.record) };
      const record: ExecutionRecord = {
        id: e.id,
        workflow: e.workflow,
        version: e.version,
        input: copy(e.input),
        status: e.claim ? "running" : "pending",
        createdAt: e.nowMs,
        updatedAt: e.nowMs,
        deadlineAt: e.deadlineAt,
        wakeAt: null,
        waitingFor: [],
        waitingOn: null,
        owner: e.claim?.owner ?? null,
        leaseUntil: e.claim ? e.nowMs + e.claim.leaseMs : null,
        generation: e.claim ? 1 : 0,
        cancelRequested: null,
        output: null,
        error: null,
        endedAt: null,
      };
      const row: Row = {
        record,
        order: rows.size,
        dueVersion: 0,
        due: null,
        journal: [],
        keys: new Set(),
        signals: [],
      };
      rows.set(e.id, row);
      index(row);
      return { created: true, record: copy(record) };
    },
    async get(id) {
      const row = rows.get(id);
      return row ? copy(row.record) : null;
    },
    async list(filter: ListFilter = {}) {
      const statuses =
        filter.status === undefined
          ? null
          : typeof filter.status === "string"
            ? [filter.status]
            : filter.status;
      const out = [...rows.values()]
        .map((r) => r.record)
        .filter((r) => (statuses ? statuses.includes(r.status) : true))
        .filter((r) => (filter.workflow === undefined ? true : r.workflow === filter.workflow))
        .sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : -1));
      return copy(out.slice(0, filter.limit ?? 100));
    },
    async journal(id) {
      return copy(rows.get(id)?.journal ?? []);
    },
    async signals(id) {
      return copy(rows.get(id)?.signals ?? []);
    },
    async claim(owner, nowMs, leaseMs, limit, only) {
      // Due entries in order (oldest due first), up to `limit`; those it does not take go back.
      const due: Row[] = [];
      const skipped: DueEntry<Row>[] = [];
      for (
        let top = heap.peek();
        top !== undefined && top.at <= nowMs && due.length < limit;
        top = heap.peek()
      ) {
        heap.pop();
        const r = top.row.record;
        if (runnable(r, nowMs) && (only === undefined || only.includes(`${r.workflow}@${r.version}`)))
          due.push(top.row);
        else skipped.push(top);
      }
      for (const e of skipped) heap.push(e);
      const out: Claimed[] = [];
      for (const row of due) {
        update(row, {
          status: "running",
          owner,
          leaseUntil: nowMs + leaseMs,
          generation: row.record.generation + 1,
          updatedAt: nowMs,
          wakeAt: null,
          waitingFor: [],
          waitingOn: null,
        });
        out.push(copy({ record: row.record, journal: row.journal, signals: row.signals }));
      }
      return out;
    },
    async renew(id, lease, leaseUntil) {
      try {
        update(current(id, lease), { leaseUntil });
        return true;
      } catch {
        return false;
      }
    },
    async append(id, lease, entries) {
      const row = current(id, lease);
      // All or none: every key is checked, against the journal and the batch, before any is written.
      const batch = new Set<string>();
      for (const e of entries) {
        if (row.keys.has(e.key) || batch.has(e.key)) throw new DuplicateEntryError(id, e.key);
        batch.add(e.key);
      }
      for (const e of entries) {
        row.keys.add(e.key);
        row.journal.push(copy(e));
      }
    },
    async park(id, lease, park: Park) {
      const row = current(id, lease);
      const woken = row.signals.some((s) => s.seq > park.signalsSeen && park.waitingFor.includes(s.name));
      const due = woken || row.record.cancelRequested !== null;
      update(row, {
        status: due ? "pending" : park.status,
        wakeAt: park.wakeAt,
        waitingFor: [...park.waitingFor],
        waitingOn: park.waitingOn,
        owner: null,
        leaseUntil: null,
        updatedAt: park.nowMs,
      });
    },
    async release(id, lease, nowMs) {
      const row = current(id, lease);
      update(row, { status: "pending", owner: null, leaseUntil: null, updatedAt: nowMs });
    },
    async finish(id, lease, finish: Finish) {
      const row = current(id, lease);
      update(row, {
        status: finish.status,
        output: finish.status === "completed" ? copy(finish.output) : null,
        error: finish.status === "completed" ? null : copy(finish.error),
        owner: null,
        leaseUntil: null,
        wakeAt: null,
        waitingFor: [],
        waitingOn: null,
        updatedAt: finish.nowMs,
        endedAt: finish.nowMs,
      });
    },
    async signal(id, name, payload: JsonValue, nowMs) {
      const row = rows.get(id);
      if (!row || ended(row.record)) return null;
      const seq = row.signals.length + 1;
      row.signals.push({ seq, name, payload: copy(payload), at: nowMs });
      const r = row.record;
      if ((r.status === "waiting" || r.status === "sleeping") && r.waitingFor.includes(name))
        update(row, { status: "pending", updatedAt: nowMs });
      return seq;
    },
    async requestCancel(id, reason, nowMs) {
      const row = rows.get(id);
      if (!row) return null;
      if (!ended(row.record) && row.record.cancelRequested === null) {
        const parked = row.record.status === "sleeping" || row.record.status === "waiting";
        update(row, { cancelRequested: reason, updatedAt: nowMs, ...(parked ? { status: "pending" } : {}) });
      }
      return copy(row.record);
    },
    async nextDueAt() {
      return heap.peek()?.at ?? null;
    },
  };
}

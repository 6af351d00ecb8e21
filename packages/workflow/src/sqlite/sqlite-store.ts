/**
 * The SQLite store: the embedded durable default, a file and no server. Several processes can share
 * the file: it runs in WAL mode (readers never wait for the writer) with a busy timeout (a writer
 * waits its turn instead of failing), and every operation that reads before it writes runs in one
 * `BEGIN IMMEDIATE` transaction, so two processes never claim one execution.
 *
 * better-sqlite3 is synchronous: each call runs on the caller's thread, for microseconds plus, per
 * write, the commit's fsync (see `synchronous`), and for up to `busyTimeoutMs` when another process
 * holds the write lock. The store's methods are async for the contract's sake.
 * @module
 */
import type BetterSqlite3 from "better-sqlite3";
import { loadPeer } from "../store/missing-package.js";
import {
  byExecution,
  type EntryRow,
  type ExecutionRow,
  type SignalRow,
  toEntry,
  toRecord,
  toSignal,
} from "../store/sql-rows.js";
import type { Claimed, ListFilter, WorkflowStore } from "../store/store.js";
import { DuplicateEntryError, LeaseLostError } from "../store/store-errors.js";
import { migrate } from "./schema.js";
import { prepare, type Statements } from "./statements.js";

/**
 * Which file {@link createSqliteStore} opens, and how it waits and commits.
 *
 * @example
 * ```ts
 * import type { SqliteStoreOptions } from "@keel/workflow/sqlite";
 * const options: SqliteStoreOptions = { path: "./keel.db", busyTimeoutMs: 10_000, synchronous: "normal" };
 * console.log(options.synchronous); // normal
 * ```
 */
export interface SqliteStoreOptions {
  /** The database file (created if missing), or `":memory:"` (one process, nothing kept). */
  readonly path: string;
  /** How long a write waits for another process's transaction before failing (default 5,000). */
  readonly busyTimeoutMs?: number;
  /**
   * `"full"` (the default): a commit is on the disk when the call returns, and survives a power
   * loss. `"normal"`: it survives the process's death (`kill -9`), but the last commits can be lost
   * if the machine loses power; a write costs no fsync.
   */
  readonly synchronous?: "full" | "normal";
}

/**
 * A {@link WorkflowStore} in an SQLite file, through `better-sqlite3` 12 (an optional peer:
 * `npm install better-sqlite3@12`). Call `init()` once per process before using it: it creates the
 * tables, or brings them up to date.
 *
 * **Time.** Instants are the caller's (`nowMs`); SQLite's clock is never read.
 *
 * @throws {MissingPackageError} when `better-sqlite3` is not installed.
 * @example
 * ```ts
 * import { createSqliteStore } from "@keel/workflow/sqlite";
 * const store = createSqliteStore({ path: ":memory:" });
 * await store.init();
 * await store.create({ id: "order-7", workflow: "checkout", version: 1, input: { cart: 7 }, deadlineAt: null, nowMs: 0 });
 * const [claimed] = await store.claim("worker-a", 1, 30_000, 10);
 * console.log(claimed?.record.status, claimed?.record.generation); // running 1
 * await store.close();
 * ```
 */
export function createSqliteStore(options: SqliteStoreOptions): WorkflowStore {
  const Database = loadPeer<typeof BetterSqlite3>(
    "better-sqlite3",
    "createSqliteStore",
    "the SQLite store needs it",
  );
  const { path } = options;
  const db = new Database(path);
  // The busy timeout first: switching to WAL waits for other processes opening the file.
  db.pragma(`busy_timeout = ${Math.max(0, Math.trunc(options.busyTimeoutMs ?? 5_000))}`);
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${options.synchronous === "normal" ? "NORMAL" : "FULL"}`);
  let st: Statements | null = null;
  const ready = (): Statements => {
    if (st === null) throw new Error(`sqlite store ${path}: call init() before using it`);
    return st;
  };
  const json = (value: unknown) => (value === null || value === undefined ? null : JSON.stringify(value));
  const lost = (id: string, owner: string, generation: number) => new LeaseLostError(id, owner, generation);
  const claimOn = (ids: string[], rows: ExecutionRow[]): Claimed[] => {
    const s = ready();
    const list = JSON.stringify(ids);
    const journals = byExecution(s.journal.all({ ids: list }) as EntryRow[], toEntry);
    const kept = byExecution(s.signals.all({ ids: list }) as SignalRow[], toSignal);
    return rows.map((r) => ({
      record: toRecord(r),
      journal: journals.get(r.id) ?? [],
      signals: kept.get(r.id) ?? [],
    }));
  };
  const claimTx = db.transaction(
    (owner: string, now: number, leaseMs: number, limit: number, only: string | null) => {
      const s = ready();
      const due = s.due.all({ now, limit, only }) as { id: string }[];
      const rows = due.map(
        ({ id }) => s.claim.get({ id, owner, now, leaseUntil: now + leaseMs }) as ExecutionRow,
      );
      return rows.length === 0
        ? []
        : claimOn(
            due.map((d) => d.id),
            rows,
          );
    },
  );
  const appendTx = db.transaction(
    (id: string, owner: string, generation: number, entries: readonly Entry[]) => {
      const s = ready();
      if (s.current.get({ id, owner, generation }) === undefined) throw lost(id, owner, generation);
      for (const e of entries) {
        try {
          s.append.run({
            id,
            key: e.key,
            kind: e.kind,
            ok: e.ok ? 1 : 0,
            value: JSON.stringify(e.value),
            error: json(e.error),
            attempts: e.attempts,
            startedAt: e.startedAt,
            endedAt: e.endedAt,
          });
        } catch (err) {
          if ((err as { code?: unknown }).code === "SQLITE_CONSTRAINT_PRIMARYKEY")
            throw new DuplicateEntryError(id, e.key);
          throw err;
        }
      }
    },
  );
  const signalTx = db.transaction((id: string, name: string, payload: string, now: number): number | null => {
    const s = ready();
    const numbered = s.signalSeq.get({ id, name, now }) as { signal_seq: number } | undefined;
    if (numbered === undefined) return null;
    s.signal.run({ id, seq: numbered.signal_seq, name, payload, now });
    return numbered.signal_seq;
  });
  const get = (id: string) => {
    const row = ready().get.get(id) as ExecutionRow | undefined;
    return row === undefined ? null : toRecord(row);
  };

  return {
    description: `sqlite ${path}`,
    async init() {
      migrate(db);
      st ??= prepare(db);
    },
    async close() {
      db.close();
    },
    async create(e) {
      const made = firstRow(ready().create, {
        id: e.id,
        workflow: e.workflow,
        version: e.version,
        input: JSON.stringify(e.input),
        now: e.nowMs,
        deadlineAt: e.deadlineAt,
        owner: e.claim?.owner ?? null,
        leaseUntil: e.claim ? e.nowMs + e.claim.leaseMs : null,
      });
      if (made !== undefined) return { created: true, record: toRecord(made) };
      const existing = get(e.id);
      if (existing === null) throw new Error(`create(${e.id}): the execution exists and cannot be read`);
      return { created: false, record: existing };
    },
    async get(id) {
      return get(id);
    },
    async list(filter: ListFilter = {}) {
      const statuses =
        filter.status === undefined ? null : JSON.stringify(([] as string[]).concat(filter.status));
      const rows = ready().list.all({
        statuses,
        workflow: filter.workflow ?? null,
        limit: filter.limit ?? 100,
      });
      return (rows as ExecutionRow[]).map(toRecord);
    },
    async journal(id) {
      return (ready().journal.all({ ids: JSON.stringify([id]) }) as EntryRow[]).map(toEntry);
    },
    async signals(id) {
      return (ready().signals.all({ ids: JSON.stringify([id]) }) as SignalRow[]).map(toSignal);
    },
    async claim(owner, nowMs, leaseMs, limit, only) {
      return claimTx.immediate(
        owner,
        nowMs,
        leaseMs,
        limit,
        only === undefined ? null : JSON.stringify(only),
      );
    },
    async renew(id, lease, leaseUntil) {
      return (
        ready().renew.run({ id, owner: lease.owner, generation: lease.generation, leaseUntil }).changes === 1
      );
    },
    async append(id, lease, entries) {
      appendTx.immediate(id, lease.owner, lease.generation, entries);
    },
    async park(id, lease, park) {
      const done = ready().park.run({
        id,
        owner: lease.owner,
        generation: lease.generation,
        status: park.status,
        wakeAt: park.wakeAt,
        waitingFor: JSON.stringify(park.waitingFor),
        waitingOn: park.waitingOn,
        seen: park.signalsSeen,
        now: park.nowMs,
      });
      if (done.changes !== 1) throw lost(id, lease.owner, lease.generation);
    },
    async release(id, lease, nowMs) {
      const done = ready().release.run({ id, owner: lease.owner, generation: lease.generation, now: nowMs });
      if (done.changes !== 1) throw lost(id, lease.owner, lease.generation);
    },
    async finish(id, lease, finish) {
      const done = ready().finish.run({
        id,
        owner: lease.owner,
        generation: lease.generation,
        status: finish.status,
        output: finish.status === "completed" ? JSON.stringify(finish.output) : null,
        error: finish.status === "completed" ? null : JSON.stringify(finish.error),
        now: finish.nowMs,
      });
      if (done.changes !== 1) throw lost(id, lease.owner, lease.generation);
    },
    async signal(id, name, payload, nowMs) {
      return signalTx.immediate(id, name, JSON.stringify(payload), nowMs);
    },
    async requestCancel(id, reason, nowMs) {
      const changed = firstRow(ready().requestCancel, { id, reason, now: nowMs });
      return changed === undefined ? get(id) : toRecord(changed);
    },
    async nextDueAt() {
      return (ready().nextDueAt.get() as { at: number | null }).at;
    },
  };
}

type Entry = Parameters<WorkflowStore["append"]>[2][number];

/**
 * The row a write's RETURNING gives, the statement run to its end (`all`, not `get`): SQLite calls
 * its WAL hook, which runs the automatic checkpoint, only when a statement steps to its end in
 * autocommit mode; `get` stops at the first row and resets the statement, which commits without
 * it. With `get`, creating 20,000 executions left a 380 MB WAL never checkpointed.
 */
function firstRow(statement: BetterSqlite3.Statement, params: object): ExecutionRow | undefined {
  return (statement.all(params) as ExecutionRow[])[0];
}

/**
 * The PostgreSQL store: executions shared by a fleet of processes through one database. What each
 * operation costs, in round trips to the server: `append` one (one INSERT, whatever the number of
 * entries; appends of several executions that arrive together share one, see `flush`), `renew`/`park`/`release`/`finish`/`signal` one, `create` one (two when the id exists
 * and was created at the same moment elsewhere), `claim` one UPDATE, then, when some claimed
 * execution has a journal or signals, one query for all their journals and one for all their
 * signals, sent at once (a new execution's claim is the UPDATE alone).
 * @module
 */
import type { Pool, QueryResultRow } from "pg";
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
import type {
  Claimed,
  ExecutionRecord,
  JournalEntry,
  Lease,
  ListFilter,
  WorkflowStore,
} from "../store/store.js";
import { DuplicateEntryError, LeaseLostError } from "../store/store-errors.js";
import { migrate, quoteSchema } from "./schema.js";
import { type Statement, statements } from "./statements.js";

/**
 * How {@link createPostgresStore} connects, and which schema holds its tables.
 *
 * @example
 * ```ts
 * import type { PostgresStoreOptions } from "@keel/workflow/postgres";
 * const options: PostgresStoreOptions = { connectionString: "postgres://postgres@127.0.0.1:5432/test", schema: "orders" };
 * console.log(options.schema); // orders
 * ```
 */
export interface PostgresStoreOptions {
  /**
   * A `pg` Pool of your own: the store uses it and leaves it open at `close()`. Typed by what the
   * store calls on it, so that using the store needs no `@types/pg` (a `pg.Pool` is one).
   */
  readonly pool?: PgPoolLike;
  /** Where to connect when no `pool` is given (else `pg`'s defaults: the `PG*` environment variables). */
  readonly connectionString?: string;
  /** The schema that holds the store's tables (default `keel`); created by `init()` if missing. */
  readonly schema?: string;
}

/**
 * What the store calls on a pool: `pg.Pool` is one. The store's code is typed against `pg`'s own
 * types; this is the public face, so a project that passes no pool (or has no `@types/pg`) still
 * type-checks.
 *
 * @example
 * ```ts
 * import type { PgPoolLike } from "@keel/workflow/postgres";
 * const fake: PgPoolLike = { query: async () => ({ rows: [] }), connect: async () => { throw new Error("no") }, end: async () => {}, on: () => fake };
 * console.log(typeof fake.query); // function
 * ```
 */
export interface PgPoolLike {
  // biome-ignore lint/suspicious/noExplicitAny: pg's own overloads; the store calls them as pg types them.
  query(...args: any[]): Promise<any>;
  // biome-ignore lint/suspicious/noExplicitAny: see query.
  connect(): Promise<any>;
  end(): Promise<void>;
  // biome-ignore lint/suspicious/noExplicitAny: see query.
  on(event: "error", listener: (error: Error) => void): any;
}

const UNIQUE_VIOLATION = "23505";

/**
 * Append statements in flight at once, per store. One: while it runs, the next appends gather into
 * the following statement (see `flush`).
 */
const MAX_APPENDS_IN_FLIGHT = 1;
/** Appends in one statement at most (a bound on its size; the rest wait for the next). */
const MAX_APPENDS_PER_STATEMENT = 256;

/** An append waiting for its statement. */
interface Append {
  readonly id: string;
  readonly lease: Lease;
  readonly entries: readonly JournalEntry[];
  resolve(): void;
  reject(error: unknown): void;
}

/**
 * A {@link WorkflowStore} in PostgreSQL, through `pg` (an optional peer: `npm install pg`). Call
 * `init()` once per process before using it: it creates the schema and tables, or brings them up to
 * date, safely when several processes start at once.
 *
 * Several processes (on several machines) can share one database: a claim is a row lock taken with
 * `SKIP LOCKED`, so claimers never wait for each other nor take one execution twice, and every write
 * of a claim is fenced by its generation.
 *
 * **Time.** Instants are the caller's (`nowMs`); the server's clock is never read.
 *
 * @throws {MissingPackageError} when no `pool` is given and `pg` is not installed.
 * @example
 * ```ts
 * import pg from "pg";
 * import { createPostgresStore } from "@keel/workflow/postgres";
 * const pool = new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:5432/test" });
 * const store = createPostgresStore({ pool, schema: "keel_example" }); // your pool: it stays yours
 * await store.init();
 * await store.create({ id: "order-7", workflow: "checkout", version: 1, input: { cart: 7 }, deadlineAt: null, nowMs: Date.now() });
 * console.log((await store.get("order-7"))?.status); // pending
 * await store.close();
 * await pool.query("DROP SCHEMA keel_example CASCADE"); // the example tidies up; your schema stays
 * await pool.end();
 * ```
 */
export function createPostgresStore(options: PostgresStoreOptions = {}): WorkflowStore {
  const schema = options.schema ?? "keel";
  const sql = statements(quoteSchema(schema));
  const own = options.pool === undefined;
  const pool = (options.pool as Pool | undefined) ?? openPool(options.connectionString);
  const q = async <R extends QueryResultRow>(statement: Statement, values: unknown[]) =>
    pool.query<R>({ name: statement.name, text: statement.text, values: values.map(wholeMs) });
  // Instants are whole milliseconds in bigint columns; a real clock reads fractions (1796…637.359),
  // which PostgreSQL refuses as a bigint: rounded here, moving an instant by at most half a
  // millisecond (journaled values keep their exact instants inside their JSON).
  const whole = (v: unknown) =>
    typeof v === "number" && !Number.isInteger(v) && Number.isFinite(v) ? Math.round(v) : v;
  const wholeMs = (v: unknown) => (Array.isArray(v) ? v.map(whole) : whole(v));
  const json = (value: unknown) => (value === null || value === undefined ? null : JSON.stringify(value));
  const lost = (id: string, owner: string, generation: number) => new LeaseLostError(id, owner, generation);

  /** One append as its caller made it: one statement, its errors as the contract names them. */
  const appendAlone = async ({ id, lease, entries }: Append): Promise<void> => {
    if (entries.length === 0) {
      const found = await q(sql.current, [id, lease.owner, lease.generation]);
      if (found.rowCount !== 1) throw lost(id, lease.owner, lease.generation);
      return;
    }
    let written: number | null;
    try {
      const claim = [id, lease.owner, lease.generation];
      if (entries.length === 1) {
        const e = entries[0]!;
        written = (
          await q(sql.appendOne, [
            ...claim,
            e.key,
            e.kind,
            e.ok,
            JSON.stringify(e.value),
            json(e.error),
            e.attempts,
            e.startedAt,
            e.endedAt,
          ])
        ).rowCount;
      } else {
        written = (
          await q(sql.append, [
            ...claim,
            entries.map((e) => e.key),
            entries.map((e) => e.kind),
            entries.map((e) => e.ok),
            entries.map((e) => JSON.stringify(e.value)),
            entries.map((e) => json(e.error)),
            entries.map((e) => e.attempts),
            entries.map((e) => e.startedAt),
            entries.map((e) => e.endedAt),
          ])
        ).rowCount;
      }
    } catch (e) {
      if ((e as { code?: unknown }).code === UNIQUE_VIOLATION)
        throw new DuplicateEntryError(id, duplicateKey(e, id, entries));
      throw e;
    }
    // Nothing written: the claim's row did not match (rows are written all or none).
    if (written === 0) throw lost(id, lease.owner, lease.generation);
  };

  /**
   * Several claims' appends in one statement (`appendMany`): each is still all or none (one
   * statement is atomic, and an execution's rows all pass its fence or none does). A duplicate key
   * fails the whole statement, so the batch is then sent again one append at a time, to fail only
   * the append that holds it, with its key.
   */
  const appendTogether = async (batch: readonly Append[]): Promise<void> => {
    const cols: unknown[][] = Array.from({ length: 11 }, () => []);
    for (const { id, lease, entries } of batch)
      for (const e of entries) {
        cols[0]!.push(id);
        cols[1]!.push(lease.owner);
        cols[2]!.push(lease.generation);
        cols[3]!.push(e.key);
        cols[4]!.push(e.kind);
        cols[5]!.push(e.ok);
        cols[6]!.push(JSON.stringify(e.value));
        cols[7]!.push(json(e.error));
        cols[8]!.push(e.attempts);
        cols[9]!.push(e.startedAt);
        cols[10]!.push(e.endedAt);
      }
    let landed: Set<string>;
    try {
      const rows = (await q<{ execution_id: string }>(sql.appendMany, cols)).rows;
      landed = new Set(rows.map((r) => r.execution_id));
    } catch (e) {
      if ((e as { code?: unknown }).code !== UNIQUE_VIOLATION) {
        for (const a of batch) a.reject(e);
        return;
      }
      // In order: one execution's appends land in the order they were made.
      for (const a of batch) await appendAlone(a).then(a.resolve, a.reject);
      return;
    }
    for (const a of batch)
      if (landed.has(a.id)) a.resolve();
      else a.reject(lost(a.id, a.lease.owner, a.lease.generation));
  };

  // Group commit: appends that arrive while others are in flight wait, and go out together as one
  // statement (one round trip, one commit, one WAL flush) when a slot frees. With 16 executions
  // stepping at once, ~16 commits become one.
  let queued: Append[] = [];
  let inFlight = 0;
  let flushScheduled = false;
  const flush = () => {
    flushScheduled = false;
    if (queued.length === 0 || inFlight >= MAX_APPENDS_IN_FLIGHT) return;
    // One execution's appends under two claims (a lost incarnation's and the new one's) never share
    // a statement: what comes back is which executions got rows.
    const batch: Append[] = [];
    const rest: Append[] = [];
    const leaseOf = new Map<string, Lease>();
    for (const a of queued) {
      const seen = leaseOf.get(a.id);
      const fits =
        batch.length === 0 ||
        (a.entries.length > 0 &&
          batch[0]!.entries.length > 0 &&
          batch.length < MAX_APPENDS_PER_STATEMENT &&
          (seen === undefined || (seen.owner === a.lease.owner && seen.generation === a.lease.generation)));
      if (!fits) rest.push(a);
      else {
        batch.push(a);
        leaseOf.set(a.id, a.lease);
      }
    }
    queued = rest;
    inFlight++;
    const sent =
      batch.length === 1
        ? appendAlone(batch[0]!).then(batch[0]!.resolve, batch[0]!.reject)
        : appendTogether(batch);
    void sent.finally(() => {
      inFlight--;
      flush();
    });
  };

  return {
    description: `postgres ${where(pool)} (schema ${schema})`,
    init: () => migrate(pool, schema),
    async close() {
      if (own) await pool.end();
    },
    async create(e) {
      const made = await q<ExecutionRow>(sql.create, [
        e.id,
        e.workflow,
        e.version,
        JSON.stringify(e.input),
        e.nowMs,
        e.deadlineAt,
        e.claim?.owner ?? null,
        e.claim?.leaseMs ?? null,
      ]);
      if (made.rows[0]) return { created: true, record: toRecord(made.rows[0]) };
      const existing = await this.get(e.id);
      if (existing === null) throw new Error(`create(${e.id}): the execution exists and cannot be read`);
      return { created: false, record: existing };
    },
    async get(id) {
      const found = await q<ExecutionRow>(sql.get, [id]);
      return found.rows[0] ? toRecord(found.rows[0]) : null;
    },
    async list(filter: ListFilter = {}) {
      const statuses = filter.status === undefined ? null : ([] as string[]).concat(filter.status);
      const found = await q<ExecutionRow>(sql.list, [statuses, filter.workflow ?? null, filter.limit ?? 100]);
      return found.rows.map(toRecord);
    },
    async journal(id) {
      return (await q<EntryRow>(sql.journal, [[id]])).rows.map(toEntry);
    },
    async signals(id) {
      return (await q<SignalRow>(sql.signals, [[id]])).rows.map(toSignal);
    },
    async claim(owner, nowMs, leaseMs, limit, only) {
      type Row = ExecutionRow & { signal_seq: string; was_due: string };
      const claimed = await q<Row>(sql.claim, [
        owner,
        nowMs,
        leaseMs,
        limit,
        only === undefined ? null : [...only],
      ]);
      if (claimed.rows.length === 0) return [];
      // Read after the claim committed: every append of an earlier claim either committed before
      // it (it held the row's lock) or failed, so the journal read here is complete. An execution
      // at its first claim has no journal, one never signalled no signals: a new execution's claim
      // is one round trip.
      const replayed = claimed.rows.filter((r) => Number(r.generation) > 1).map((r) => r.id);
      const signalled = claimed.rows.filter((r) => Number(r.signal_seq) > 0).map((r) => r.id);
      const [entries, signals] = await Promise.all([
        replayed.length === 0 ? [] : q<EntryRow>(sql.journal, [replayed]).then((r) => r.rows),
        signalled.length === 0 ? [] : q<SignalRow>(sql.signals, [signalled]).then((r) => r.rows),
      ]);
      const journals = byExecution(entries, toEntry);
      const kept = byExecution(signals, toSignal);
      return claimed.rows
        .sort((a, b) => Number(a.was_due) - Number(b.was_due))
        .map(
          (r): Claimed => ({
            record: toRecord(r),
            journal: journals.get(r.id) ?? [],
            signals: kept.get(r.id) ?? [],
          }),
        );
    },
    async renew(id, lease, leaseUntil) {
      return (await q(sql.renew, [id, lease.owner, lease.generation, leaseUntil])).rowCount === 1;
    },
    append(id, lease, entries) {
      return new Promise<void>((resolve, reject) => {
        queued.push({ id, lease, entries, resolve, reject });
        if (!flushScheduled && inFlight < MAX_APPENDS_IN_FLIGHT) {
          flushScheduled = true;
          queueMicrotask(flush);
        }
      });
    },
    async park(id, lease, park) {
      const done = await q(sql.park, [
        id,
        lease.owner,
        lease.generation,
        park.status,
        park.wakeAt,
        park.waitingFor,
        park.waitingOn,
        park.signalsSeen,
        park.nowMs,
      ]);
      if (done.rowCount !== 1) throw lost(id, lease.owner, lease.generation);
    },
    async release(id, lease, nowMs) {
      const done = await q(sql.release, [id, lease.owner, lease.generation, nowMs]);
      if (done.rowCount !== 1) throw lost(id, lease.owner, lease.generation);
    },
    async finish(id, lease, finish) {
      const output = finish.status === "completed" ? JSON.stringify(finish.output) : null;
      const error = finish.status === "completed" ? null : JSON.stringify(finish.error);
      const done = await q(sql.finish, [
        id,
        lease.owner,
        lease.generation,
        finish.status,
        output,
        error,
        finish.nowMs,
      ]);
      if (done.rowCount !== 1) throw lost(id, lease.owner, lease.generation);
    },
    async signal(id, name, payload, nowMs) {
      const kept = await q<{ seq: string }>(sql.signal, [id, name, JSON.stringify(payload), nowMs]);
      return kept.rows[0] ? Number(kept.rows[0].seq) : null;
    },
    async requestCancel(id, reason, nowMs): Promise<ExecutionRecord | null> {
      const changed = await q<ExecutionRow>(sql.requestCancel, [id, reason, nowMs]);
      return changed.rows[0] ? toRecord(changed.rows[0]) : this.get(id);
    },
    async nextDueAt() {
      const found = await q<{ at: string | null }>(sql.nextDueAt, []);
      const at = found.rows[0]?.at ?? null;
      return at === null ? null : Number(at);
    },
  };
}

function openPool(connectionString: string | undefined): Pool {
  const pg = loadPeer<typeof import("pg")>("pg", "createPostgresStore", "the PostgreSQL store needs it");
  const pool = new pg.Pool(connectionString === undefined ? {} : { connectionString });
  // An idle connection that breaks (a server restart) is dropped by the pool and the next query
  // opens another; unheard, the pool's error event would end the process.
  pool.on("error", () => undefined);
  return pool;
}

/** `host:port/database`, for messages. */
function where(pool: Pool): string {
  const o = (
    pool as { options?: { host?: string; port?: number; database?: string; connectionString?: string } }
  ).options;
  if (o?.connectionString) {
    try {
      const url = new URL(o.connectionString);
      return `${url.hostname}:${url.port || 5432}${url.pathname}`;
    } catch {
      return "(connection string)";
    }
  }
  return `${o?.host ?? process.env.PGHOST ?? "localhost"}:${o?.port ?? process.env.PGPORT ?? 5432}/${o?.database ?? process.env.PGDATABASE ?? ""}`;
}

/** The key PostgreSQL names in a unique violation (`Key (execution_id, key)=(id, k) already exists.`). */
function duplicateKey(e: unknown, id: string, entries: readonly { key: string }[]): string {
  const detail = (e as { detail?: unknown }).detail;
  const prefix = `Key (execution_id, key)=(${id}, `;
  const suffix = ") already exists.";
  if (typeof detail === "string" && detail.startsWith(prefix) && detail.endsWith(suffix))
    return detail.slice(prefix.length, -suffix.length);
  return entries[0]!.key;
}

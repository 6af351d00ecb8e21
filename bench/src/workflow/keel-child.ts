/**
 * One Keel sample of the workflow bench: `workload` (fanout | sequential) on `store` (postgres |
 * sqlite | memory), and one JSON line out (see `Sample` in `./workloads.ts`). Keel runs from its
 * build (`packages/*\/dist`), as users get it.
 *
 * The workflow is `@keel/workflow`'s idiom: `workflow(name, function* (n) { ... })` whose steps are
 * `step("noop", function* noop() {})`. One engine (`startWorkflowEngine`, concurrency as the
 * workload's) runs them; each lane starts a workflow under an id of the bench's with `engine.start`
 * and waits for `engine.result(id)`, as the DBOS sample does with its handle.
 *
 * - postgres: `createPostgresStore({ connectionString, schema: "keel_bench" })` in the sample's own
 *   database (made and dropped by the parent).
 * - sqlite: `createSqliteStore({ path })` on a file in a temporary folder of the parent's, with its
 *   default `synchronous: "full"` (every commit on the disk, as PostgreSQL's `synchronous_commit`).
 * - memory: `createMemoryStore()`, for what the engine costs with no I/O at all.
 * @module
 */
import { run, until, useScope } from "@keel/core";
import { createMemoryStore, startWorkflowEngine, step, type WorkflowStore, workflow } from "@keel/workflow";
import { createPostgresStore } from "@keel/workflow/postgres";
import { createSqliteStore } from "@keel/workflow/sqlite";
import Database from "better-sqlite3";
import { meterPg, relationBytes, walBytes } from "./pg-meter.js";
import { measure, parseChildArgs } from "./workloads.js";

const args = parseChildArgs(process.argv.slice(2));
const kind = args.rest[0];
meterPg();

function* noop(): Generator<never, void, unknown> {}

const stepsOf = workflow("steps-of", function* stepsOf(n: number) {
  for (let k = 0; k < n; k++) yield* step("noop", noop);
  return n;
});

function openStore(): {
  store: WorkflowStore;
  size?: () => Promise<number>;
  wal?: () => Promise<number>;
} {
  if (kind === "postgres")
    return {
      store: createPostgresStore({ connectionString: args.url, schema: "keel_bench" }),
      size: () => relationBytes(args.url),
      wal: () => walBytes(args.url),
    };
  if (kind === "sqlite")
    return {
      store: createSqliteStore({ path: args.url }),
      // The committed pages, WAL included, as another connection sees them: the file itself
      // grows by whole checkpoints, and its WAL file never shrinks.
      size: async () => {
        const db = new Database(args.url, { readonly: true });
        try {
          return (
            (db.pragma("page_count", { simple: true }) as number) *
            (db.pragma("page_size", { simple: true }) as number)
          );
        } finally {
          db.close();
        }
      },
    };
  if (kind === "memory") return { store: createMemoryStore() };
  throw new RangeError(`store: expected postgres, sqlite or memory, got ${kind}`);
}

const { store, size, wal } = openStore();
let started = 0;
const sample = await run(function* keelSample() {
  const engine = yield* startWorkflowEngine({
    store,
    workflows: [stepsOf],
    concurrency: args.concurrency,
  });
  const scope = yield* useScope();
  return yield* until(
    measure({
      ...args,
      run: (prefix, n) =>
        scope.spawn(function* one() {
          const { id } = yield* engine.start(stepsOf, n, { id: `${prefix}-${started++}` });
          yield* engine.result(id);
        }),
      ...(size ? { size } : {}),
      ...(wal ? { wal } : {}),
    }),
  );
});
await store.close();
console.log(JSON.stringify(sample));

/**
 * The floor of the workflow bench: no workflow library, one INSERT per step through a `pg` pool
 * (each its own transaction, so one commit, as durable as a journaled step), on the sample's own
 * database. A "workflow" of n steps is n INSERTs in a row; the lanes and the warm-up are the same
 * as the libraries' (`./workloads.ts`). What a step costs when it costs one round trip and one
 * commit, and nothing else.
 * @module
 */
import pg from "pg";
import { meterPg, relationBytes, walBytes } from "./pg-meter.js";
import { measure, parseChildArgs } from "./workloads.js";

const args = parseChildArgs(process.argv.slice(2));
meterPg();
const pool = new pg.Pool({ connectionString: args.url, max: Math.max(10, args.concurrency) });
await pool.query(
  "CREATE TABLE steps (workflow text NOT NULL, n integer NOT NULL, value text NOT NULL, PRIMARY KEY (workflow, n))",
);
const insert = { name: "insert_step", text: "INSERT INTO steps (workflow, n, value) VALUES ($1, $2, $3)" };

let started = 0;
const sample = await measure({
  ...args,
  run: async (prefix, n) => {
    const id = `${prefix}-${started++}`;
    for (let k = 0; k < n; k++) await pool.query({ ...insert, values: [id, k, "null"] });
  },
  size: () => relationBytes(args.url),
  wal: () => walBytes(args.url),
});
await pool.end();
console.log(JSON.stringify(sample));

/**
 * `keel-workflows`' command line, read into a command: which store, which executions, which form.
 * Pure (no I/O), so that every usage error is tested without a process.
 * @module
 */
import type { ExecutionStatus } from "../store/store.js";

export const STATUSES: readonly ExecutionStatus[] = [
  "pending",
  "running",
  "sleeping",
  "waiting",
  "completed",
  "failed",
  "cancelled",
];

export type StoreArg =
  | { readonly kind: "sqlite"; readonly path: string }
  | { readonly kind: "postgres"; readonly url: string; readonly schema: string };

export type Command =
  | { readonly kind: "help" }
  | {
      readonly kind: "list";
      readonly store: StoreArg;
      readonly status: readonly ExecutionStatus[] | null;
      readonly workflow: string | null;
      readonly limit: number;
      readonly json: boolean;
    }
  | { readonly kind: "show"; readonly store: StoreArg; readonly id: string; readonly json: boolean };

/** A command line that cannot be run: the message says what is wrong; the exit code is 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

const VALUED = new Set(["--sqlite", "--postgres", "--schema", "--status", "--workflow", "--limit"]);

/** Reads `argv` (without node and the script). */
export function parseArgs(argv: readonly string[]): Command {
  if (argv.length === 0 || argv.some((a) => a === "--help" || a === "-h") || argv[0] === "help")
    return { kind: "help" };
  const [verb, ...rest] = argv;
  if (verb !== "list" && verb !== "show")
    throw new UsageError(`unknown command ${JSON.stringify(verb)}: expected list or show`);
  const flags = new Map<string, string>();
  const positional: string[] = [];
  let json = false;
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    if (a === "--json") json = true;
    else if (VALUED.has(a)) {
      const value = rest[++i];
      if (value === undefined || value.startsWith("--")) throw new UsageError(`${a}: expected a value`);
      if (flags.has(a)) throw new UsageError(`${a}: given twice`);
      flags.set(a, value);
    } else if (a.startsWith("-")) throw new UsageError(`unknown option ${a}`);
    else positional.push(a);
  }
  const store = storeOf(flags);
  if (verb === "show") {
    for (const f of ["--status", "--workflow", "--limit"])
      if (flags.has(f)) throw new UsageError(`${f}: only for list`);
    if (positional.length !== 1) throw new UsageError("show: expected one execution id");
    return { kind: "show", store, id: positional[0]!, json };
  }
  if (positional.length > 0) throw new UsageError(`list: unexpected argument ${positional[0]}`);
  return {
    kind: "list",
    store,
    status: statusesOf(flags.get("--status")),
    workflow: flags.get("--workflow") ?? null,
    limit: limitOf(flags.get("--limit")),
    json,
  };
}

function storeOf(flags: ReadonlyMap<string, string>): StoreArg {
  const sqlite = flags.get("--sqlite");
  const postgres = flags.get("--postgres");
  if ((sqlite === undefined) === (postgres === undefined))
    throw new UsageError("expected one store: --sqlite <path> or --postgres <url>");
  if (sqlite !== undefined) {
    if (flags.has("--schema")) throw new UsageError("--schema: only with --postgres");
    return { kind: "sqlite", path: sqlite };
  }
  return { kind: "postgres", url: postgres!, schema: flags.get("--schema") ?? "keel" };
}

function statusesOf(value: string | undefined): ExecutionStatus[] | null {
  if (value === undefined) return null;
  const statuses = value.split(",").map((s) => s.trim());
  for (const s of statuses)
    if (!STATUSES.includes(s as ExecutionStatus))
      throw new UsageError(`--status: unknown status ${JSON.stringify(s)}, expected ${STATUSES.join(", ")}`);
  return statuses as ExecutionStatus[];
}

function limitOf(value: string | undefined): number {
  if (value === undefined) return 100;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new UsageError(`--limit: expected a whole number ≥ 1, got ${value}`);
  return n;
}

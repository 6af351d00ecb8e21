import { viewOf } from "../view.js";
/**
 * `keel-workflows`' commands: parse, open the store, read, print, close. Apart from the bin's entry
 * (`keel-workflows.ts`), so that tests run it in-process with their own output.
 * @module
 */
import { type Command, parseArgs, UsageError } from "./args.js";
import { formatList, formatShow, showJson } from "./format.js";
import { openStore, StoreOpenError } from "./open-store.js";

export const USAGE = `keel-workflows: the executions in a Keel workflow store, by status.

usage:
  keel-workflows list (--sqlite <path> | --postgres <url> [--schema keel])
                      [--status running,sleeping] [--workflow <name>] [--limit <n>] [--json]
  keel-workflows show <id> (--sqlite <path> | --postgres <url> [--schema keel]) [--json]

list    executions, newest first (at most --limit, default 100): id, workflow, status, what it
        waits on, when it last changed, and the process that holds it (running) or none (parked)
show    one execution: its record, then its journal in order (each step with its attempts,
        duration and outcome; each durable sleep and event)

--status      any of pending, running, sleeping, waiting, completed, failed, cancelled, by commas
--postgres    a connection string (postgres://user@host:5432/db); --schema is the store's schema
--json        the records as JSON (list: an array of them; show: the record with its steps)

The store is read, never written (an existing store's tables are brought up to date as an
engine's init() would; a missing file or schema is an error, not created).

Executions running in a process now: keel-inspect <pid> prints that process's task trees (start it
with main(op, { inspect: true }) or KEEL_INSPECT=1): each execution's body, the step in flight
and what it waits on.

exit codes: 0 done; 1 no such execution, or the store could not be read; 2 bad usage
`;

/** Runs the command line `argv`; returns the exit code. */
export async function keelWorkflows(
  argv: readonly string[],
  out: (text: string) => void,
  err: (text: string) => void,
): Promise<number> {
  let command: Command;
  try {
    command = parseArgs(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    err(`keel-workflows: ${e.message}\nRun keel-workflows --help for the usage.\n`);
    return 2;
  }
  if (command.kind === "help") {
    out(USAGE);
    return 0;
  }
  let opened: Awaited<ReturnType<typeof openStore>> | null = null;
  try {
    opened = await openStore(command.store);
    const { store } = opened;
    if (command.kind === "list") {
      const records = await store.list({
        ...(command.status ? { status: command.status } : {}),
        ...(command.workflow !== null ? { workflow: command.workflow } : {}),
        limit: command.limit,
      });
      out(command.json ? `${JSON.stringify(records, null, 2)}\n` : `${formatList(records)}\n`);
      return 0;
    }
    const record = await store.get(command.id);
    if (record === null) {
      err(`keel-workflows: no execution ${JSON.stringify(command.id)} in ${store.description}\n`);
      return 1;
    }
    const view = viewOf(record, await store.journal(command.id));
    out(command.json ? `${JSON.stringify(showJson(view), null, 2)}\n` : `${formatShow(view)}\n`);
    return 0;
  } catch (e) {
    const message =
      e instanceof StoreOpenError ? e.message : `the store failed: ${(e as Error)?.message ?? e}`;
    err(`keel-workflows: ${message}\n`);
    return 1;
  } finally {
    await opened?.close().catch(() => undefined);
  }
}

#!/usr/bin/env node
/**
 * `keel-inspect <pid> [--json]`: prints the task trees of a process started with
 * `main(op, { inspect: true })` (or with `KEEL_INSPECT=1` in its environment), asked over its local
 * socket: every live root, `main`'s first, then each `run()` root; with `--json`, an array of their
 * snapshots in that order. Exit code 2 when no such process listens.
 * @module
 */
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { inspectSocketPath } from "./inspect-server.js";

const [pidArg, ...flags] = process.argv.slice(2);
const pid = Number(pidArg);
if (!Number.isInteger(pid) || pid <= 0 || flags.some((f) => f !== "--json")) {
  process.stderr.write("usage: keel-inspect <pid> [--json]\n");
  process.exit(2);
}
const path = inspectSocketPath(tmpdir(), pid);
const socket = connect(path, () => socket.write(flags.includes("--json") ? "json\n" : "text\n"));
socket.setEncoding("utf8");
socket.on("data", (chunk: string) => process.stdout.write(chunk));
socket.on("error", (e: NodeJS.ErrnoException) => {
  process.stderr.write(
    `keel-inspect: no Keel process listens at ${path} (${e.code ?? e.message}); start it with main(op, { inspect: true }) or KEEL_INSPECT=1\n`,
  );
  process.exit(2);
});

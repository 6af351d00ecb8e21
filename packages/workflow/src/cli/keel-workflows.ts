#!/usr/bin/env node
/**
 * `keel-workflows`: the executions in a workflow store, by status (`list`), and one execution's
 * journal (`show`), from the command line. Run `keel-workflows --help` for the usage; the executions
 * live in a process now are `keel-inspect <pid>`'s (their task trees).
 * @module
 */
import { keelWorkflows } from "./run-command.js";

const exitCode = await keelWorkflows(
  process.argv.slice(2),
  (text) => process.stdout.write(text),
  (text) => process.stderr.write(text),
);
process.exitCode = exitCode;

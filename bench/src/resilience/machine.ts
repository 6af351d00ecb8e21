/**
 * The lines that say where and on what a run was measured.
 * @module
 */
import { spawnSync } from "node:child_process";
import os from "node:os";
import { benchDir } from "./samples.js";

/** The commit measured, and whether core had uncommitted changes (read-only git queries). */
function revision(): string {
  const git = (...args: string[]) =>
    spawnSync("git", args, { cwd: benchDir, encoding: "utf8" }).stdout?.trim() ?? "";
  const head = git("rev-parse", "--short", "HEAD") || "unknown";
  const dirty = git("status", "--porcelain", "--", "../packages/core/src") !== "";
  return `${head}${dirty ? " with uncommitted changes in packages/core/src" : ""}`;
}

/** Markdown bullet lines: date, commit, node, nproc, CPU, load at start and now. */
export function machine(loadAtStart: number): string[] {
  const cpu = os.cpus()[0]?.model.trim() ?? "unknown CPU";
  return [
    `- date: ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC; Keel built from ${revision()}`,
    `- node ${process.version}, ${os.platform()} ${os.release()} ${os.arch()}`,
    `- nproc ${os.availableParallelism()}, ${cpu}; load average ${loadAtStart.toFixed(1)} at start, ${os.loadavg()[0]!.toFixed(1)} at end`,
  ];
}

/** Formats a table: `rows[0]` is the header. */
export function markdownTable(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const fmt = (cells: readonly string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`;
  return [fmt(rows[0]!), fmt(widths.map((w) => "-".repeat(w))), ...rows.slice(1).map(fmt)].join("\n");
}

/** `×1.00`, `×12`: a ratio, two decimals below 10. */
export function times(r: number): string {
  return `×${r >= 10 ? r.toFixed(0) : r.toFixed(2)}`;
}

/**
 * The demo's output: one live progress line on a terminal (a line a second otherwise), and the
 * summary at the end.
 * @module
 */
import type { DeadLetter, ShutdownReport, WorkerStats } from "@keel/worker";

export function progressLine(s: WorkerStats, elapsedMs: number): string {
  const dead = Object.values(s.deadLettered).reduce((a, b) => a + b, 0);
  const done = s.completed + dead;
  const rate = elapsedMs > 0 ? Math.round((done * 1000) / elapsedMs) : 0;
  return `done ${done} (completed ${s.completed}, dead-lettered ${dead}) · retried ${s.retried} · in flight ${s.inFlight} · waiting ${s.waiting} · ${rate} jobs/s`;
}

export function summary(s: WorkerStats, elapsedMs: number, dead: readonly DeadLetter<unknown>[]): string[] {
  const byReason = Object.entries(s.deadLettered)
    .filter(([r, n]) => n > 0 || r === "expired" || r === "exhausted" || r === "rejected")
    .map(([r, n]) => `${r} ${n}`);
  const lines = [
    `${s.completed} completed, ${s.retried} retries, in ${(elapsedMs / 1000).toFixed(1)} s`,
    `handler time of completed jobs: p50 ${Math.round(s.durationMs.p50)} ms, p99 ${Math.round(s.durationMs.p99)} ms`,
    `dead letters by reason: ${byReason.join(", ")}`,
  ];
  for (const letter of dead.slice(0, 3)) {
    const error = letter.error as { message?: string } | undefined;
    lines.push(
      `  e.g. ${letter.id}: ${letter.reason} after ${letter.history.length} attempt(s): ${error?.message ?? ""}`,
    );
  }
  return lines;
}

export function shutdownLines(r: ShutdownReport): string[] {
  const lines = [
    `shutdown: ${r.inFlightAtStop} in flight at the stop, ${r.finishedInDrain} finished while draining, ${r.released} released (back in the queue, no attempt spent), in ${Math.round(r.elapsedMs)} ms`,
  ];
  if (r.cutTree) lines.push("cut at the end of the drain:", ...r.cutTree.split("\n").map((l) => `  ${l}`));
  return lines;
}

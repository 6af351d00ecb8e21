/**
 * A workflow engine's section in `keel-inspect`: the executions running in this process, and the
 * store's executions by status (parked ones are in no process's task tree, only in the store).
 * @module
 */
import type { InspectSectionContent } from "@keel/core";
import type { ExecutionRecord, ExecutionStatus, WorkflowStore } from "./store/store.js";

const LIVE: readonly ExecutionStatus[] = ["running", "pending", "sleeping", "waiting"];
/** At most this many of each status are listed (the store may hold millions). */
const SHOWN = 50;

export async function renderEngine(
  store: WorkflowStore,
  owner: string,
  runningHere: readonly string[],
): Promise<InspectSectionContent> {
  const lists = await Promise.all(LIVE.map((status) => store.list({ status, limit: SHOWN })));
  const failed = await store.list({ status: "failed", limit: 10 });
  const byStatus = Object.fromEntries(LIVE.map((s, i) => [s, lists[i]!.map(brief)]));
  const counts = LIVE.map((s, i) => `${s} ${lists[i]!.length === SHOWN ? `${SHOWN}+` : lists[i]!.length}`);
  const lines = [
    `owner ${owner}, store ${store.description}`,
    `running here: ${runningHere.length === 0 ? "none" : runningHere.join(", ")}`,
    `in the store: ${counts.join(", ")}`,
    ...LIVE.flatMap((s, i) => lists[i]!.map((r) => `  ${s.padEnd(8)} ${line(r)}`)),
    ...failed.map((r) => `  ${"failed".padEnd(8)} ${line(r)}: ${r.error?.message ?? ""}`),
  ];
  return {
    text: lines.join("\n"),
    data: { owner, store: store.description, runningHere, byStatus, failed: failed.map(brief) },
  };
}

function brief(r: ExecutionRecord) {
  return {
    id: r.id,
    workflow: r.workflow,
    version: r.version,
    owner: r.owner,
    waitingOn: r.waitingOn,
    updatedAt: r.updatedAt,
  };
}

function line(r: ExecutionRecord): string {
  const where = r.waitingOn ? ` waiting on ${r.waitingOn}` : r.owner ? ` in ${r.owner}` : "";
  return `${r.id} (${r.workflow}@${r.version})${where}`;
}

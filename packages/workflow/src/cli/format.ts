/**
 * What `keel-workflows` prints: a table of executions (`list`), and one execution with its journal
 * (`show`). Pure: records and views in, text out.
 * @module
 */
import type { ExecutionRecord } from "../store/store.js";
import type { ExecutionView, StepView } from "../view.js";

/** An instant on the store's clock (ms since the epoch) to the second, in UTC. */
export function instant(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return "-";
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

function duration(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)}s` : `${Math.round(ms)}ms`;
}

/** `text` cut to `max` characters, an ellipsis marking the cut. */
function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** Rows as aligned columns, the header first (the last column is not padded). */
function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: readonly string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(header), ...rows.map(line)].join("\n");
}

/** An execution's status, and a cancel asked for and not yet delivered. */
function statusOf(r: ExecutionRecord): string {
  const ended = r.status === "completed" || r.status === "failed" || r.status === "cancelled";
  return r.cancelRequested !== null && !ended ? `${r.status} (cancelling)` : r.status;
}

/** The `list` table: id, workflow, status, what it waits on, when it last changed, who holds it. */
export function formatList(records: readonly ExecutionRecord[]): string {
  if (records.length === 0) return "no executions";
  const rows = records.map((r) => [
    r.id,
    r.version === 1 ? r.workflow : `${r.workflow} v${r.version}`,
    statusOf(r),
    r.waitingOn === null ? "-" : cut(r.waitingOn, 60),
    instant(r.updatedAt),
    r.owner ?? "-",
  ]);
  return table(["ID", "WORKFLOW", "STATUS", "WAITING ON", "UPDATED", "OWNER"], rows);
}

/** A journaled value for one line: its JSON, cut. */
function preview(value: unknown): string {
  const text = value === undefined ? "" : JSON.stringify(value);
  return cut(text ?? String(value), 50);
}

function outcomeOf(s: StepView): string {
  if (!s.ok) return cut(`error: ${s.error ?? "?"}`, 60);
  if (s.kind === "sleep") return `wakes ${instant((s.value as { wakeAt?: number } | null)?.wakeAt ?? null)}`;
  if (s.kind === "event") return preview((s.value as { payload?: unknown } | null)?.payload);
  return preview(s.value);
}

/** The `show` text: the execution's record, then its steps, sleeps and events in journal order. */
export function formatShow(view: ExecutionView): string {
  const r = view.record;
  const fields: [string, string][] = [
    ["workflow", `${view.workflow} (version ${view.version})`],
    ["status", statusOf(r)],
  ];
  if (view.waitingOn !== null) fields.push(["waiting on", view.waitingOn]);
  if (r.wakeAt !== null && r.status !== "running") fields.push(["wakes", instant(r.wakeAt)]);
  fields.push(["created", instant(view.createdAt)], ["updated", instant(r.updatedAt)]);
  if (view.deadlineAt !== null) fields.push(["deadline", instant(view.deadlineAt)]);
  if (r.owner !== null) fields.push(["owner", `${r.owner} (lease until ${instant(r.leaseUntil)})`]);
  if (r.cancelRequested !== null) fields.push(["cancel", `requested: ${r.cancelRequested}`]);
  if (r.endedAt !== null) fields.push(["ended", instant(r.endedAt)]);
  if (view.status === "completed") fields.push(["output", preview(view.output)]);
  if (view.error) fields.push(["error", `${view.error.name}: ${view.error.message}`]);
  const width = Math.max(...fields.map(([k]) => k.length));
  const head = [`execution ${view.id}`, ...fields.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`)];
  if (view.steps.length === 0) return [...head, "", "no steps, sleeps or events journaled"].join("\n");
  const rows = view.steps.map((s) => [
    s.key,
    s.kind,
    s.kind === "step" ? String(s.attempts) : "-",
    s.kind === "step" ? duration(s.durationMs) : "-",
    instant(s.endedAt),
    outcomeOf(s),
  ]);
  return [...head, "", table(["STEP", "KIND", "ATTEMPTS", "DURATION", "ENDED", "OUTCOME"], rows)].join("\n");
}

/** The `show --json` form: the record, and the steps as `engine.get` reads them. */
export function showJson(view: ExecutionView): unknown {
  return { ...view.record, steps: view.steps };
}

/**
 * `describeThrown`: a thrown value in one readable line, for messages and reports.
 *
 * Written without `node:util`, so the barrel stays loadable anywhere; never throws, whatever the
 * value (a cycle, a BigInt, a getter that throws, a revoked proxy).
 * @module
 */

/** Longer descriptions are cut: a message quotes the value, it does not dump it. */
const MAX_CHARS = 200;

/**
 * One line for a thrown value: `Name: message` for an error (or an error-like object from another
 * realm), a string quoted, other objects as JSON, and `String(value)` for the rest. Never
 * `[object Object]`, and never throws.
 */
export function describeThrown(value: unknown): string {
  try {
    return cut(describe(value));
  } catch {
    try {
      return Object.prototype.toString.call(value);
    } catch {
      return "(a value that cannot be described)";
    }
  }
}

function describe(value: unknown): string {
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "function") return `function ${value.name || "(anonymous)"}`;
  if (typeof value === "bigint") return `${value}n`;
  if (value === null || typeof value !== "object") return String(value);
  const { name, message } = value as { name?: unknown; message?: unknown };
  if (typeof name === "string" && typeof message === "string") return `${name}: ${message}`;
  const own = (value as { toString?: unknown }).toString;
  if (typeof own === "function" && own !== Object.prototype.toString) {
    const text = String(value);
    if (!text.startsWith("[object ")) return text;
  }
  return json(value) ?? Object.prototype.toString.call(value);
}

/** JSON with cycles marked and BigInts as numbers; `undefined` when the value has no JSON form. */
function json(value: object): string | undefined {
  const seen = new WeakSet<object>();
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === "bigint") return `${v}n`;
    if (typeof v === "object" && v !== null) {
      if (seen.has(v)) return "[Circular]";
      seen.add(v);
    }
    return v;
  });
}

function cut(text: string): string {
  return text.length <= MAX_CHARS ? text : `${text.slice(0, MAX_CHARS - 1)}…`;
}

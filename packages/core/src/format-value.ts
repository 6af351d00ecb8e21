/**
 * One-line descriptions of thrown values, for messages that must read well whatever was thrown.
 *
 * Written without `node:util`, so the barrel stays loadable in any host.
 * @module
 */

/** Longer descriptions are cut here: a message line, not a dump. */
const MAX_LENGTH = 200;
/** Items of an array that a description shows at most. */
const MAX_ITEMS = 20;

/**
 * A readable one-line description of a thrown value: `Name: message` for an `Error` (the first line of
 * its stack), a quoted string, `42`, `Symbol(x)`, `[Function name]`, and for an object its constructor
 * name and short JSON (`{"status":503}`, `Response {"ok":false}`), cut at 200 characters. Never
 * throws, whatever getters, `toJSON` or `toString` the value has.
 *
 * @example
 * ```ts
 * import { describeThrown } from "@keel/core";
 * console.log(describeThrown(new TypeError("bad"))); // TypeError: bad
 * console.log(describeThrown({ status: 503 })); // {"status":503}
 * console.log(describeThrown("boom")); // "boom"
 * ```
 */
export function describeThrown(value: unknown): string {
  try {
    return cut(describe(value));
  } catch {
    return safeTag(value);
  }
}

function describe(value: unknown): string {
  if (value instanceof Error) return describeError(value);
  switch (typeof value) {
    case "string":
      return JSON.stringify(value);
    case "bigint":
      return `${value}n`;
    case "symbol":
      return value.toString();
    case "function":
      return `[Function ${value.name || "(anonymous)"}]`;
    case "object":
      return value === null ? "null" : describeObject(value);
    default:
      return String(value);
  }
}

function describeError(error: Error): string {
  const head = `${error.name || "Error"}${error.message ? `: ${error.message}` : ""}`;
  return head.split("\n", 1)[0]!;
}

function describeObject(value: object): string {
  // An error from another realm (a worker, a vm context) fails `instanceof Error` but reads as one.
  const { name, message } = value as { name?: unknown; message?: unknown };
  if (typeof name === "string" && typeof message === "string")
    return `${name}: ${message}`.split("\n", 1)[0]!;
  const own = (value as { toString?: unknown }).toString;
  if (typeof own === "function" && own !== Object.prototype.toString && !Array.isArray(value)) {
    const text = String(value);
    if (!text.startsWith("[object ")) return text;
  }
  const json = shortJson(value);
  const ctor = constructorName(value);
  if (json === undefined) return ctor ? `[object ${ctor}]` : safeTag(value);
  return ctor && ctor !== "Object" && ctor !== "Array" ? `${ctor} ${json}` : json;
}

/**
 * JSON with cycles, bigints, symbols and functions shown instead of throwing or vanishing, and
 * bounded: a long string is cut, a long array sliced, and once about two lines' worth is written
 * the rest is left out (a thrown object holding megabytes costs one pass over its top level).
 */
function shortJson(value: object): string | undefined {
  const seen = new WeakSet<object>();
  let budget = 2 * MAX_LENGTH;
  return JSON.stringify(value, (key, v: unknown) => {
    if (budget <= 0) return undefined;
    budget -= key.length + 3;
    if (typeof v === "string") {
      budget -= Math.min(v.length, MAX_LENGTH);
      return v.length > MAX_LENGTH ? v.slice(0, MAX_LENGTH) : v;
    }
    if (typeof v === "bigint") return `${v}n`;
    if (typeof v === "symbol") return v.toString();
    if (typeof v === "function") return `[Function ${v.name || "(anonymous)"}]`;
    if (v instanceof Error) return describeError(v);
    if (typeof v === "object" && v !== null) {
      if (seen.has(v)) return "[Circular]";
      seen.add(v);
      if (Array.isArray(v) && v.length > MAX_ITEMS) return v.slice(0, MAX_ITEMS);
    }
    return v;
  });
}

function constructorName(value: object): string | undefined {
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto === null) return undefined;
  const ctor = (proto as { constructor?: unknown }).constructor;
  return typeof ctor === "function" && ctor.name ? ctor.name : undefined;
}

function safeTag(value: unknown): string {
  try {
    return Object.prototype.toString.call(value);
  } catch {
    return "[unknown value]";
  }
}

function cut(text: string): string {
  const line = text.replace(/\s*\n\s*/g, " ");
  return line.length > MAX_LENGTH ? `${line.slice(0, MAX_LENGTH - 1)}…` : line;
}

/**
 * @internal Prints `line` and `value` to `console.error` (its stack, for an error) without ever
 * throwing: a value that breaks `console`'s own formatting (a throwing `stack` getter, a throwing
 * `util.inspect.custom`) is printed as its description instead.
 */
export function printThrown(line: string, value: unknown): void {
  try {
    console.error(line, value);
  } catch {
    try {
      console.error(`${line} ${describeThrown(value)}`);
    } catch {}
  }
}

/**
 * @internal Milliseconds as people read them, in messages, labels, log records and the task tree:
 * at most one decimal (`137.2`, `250`, `1796519528873`), from a real clock's fractional readings
 * (`137.24531`). `Infinity` and `NaN` stay as they are.
 */
export function roundMs(ms: number): number {
  return Number.isFinite(ms) ? Math.round(ms * 10) / 10 : ms;
}

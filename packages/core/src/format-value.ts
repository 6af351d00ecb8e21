/**
 * One-line descriptions of thrown values, for messages that must read well whatever was thrown.
 *
 * Written without `node:util`, so the barrel stays loadable in any host.
 * @module
 */

/** Longer descriptions are cut here: a message line, not a dump. */
const MAX_LENGTH = 200;

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

/** JSON with cycles, bigints, symbols and functions shown instead of throwing or vanishing. */
function shortJson(value: object): string | undefined {
  const seen = new WeakSet<object>();
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === "bigint") return `${v}n`;
    if (typeof v === "symbol") return v.toString();
    if (typeof v === "function") return `[Function ${v.name || "(anonymous)"}]`;
    if (v instanceof Error) return describeError(v);
    if (typeof v === "object" && v !== null) {
      if (seen.has(v)) return "[Circular]";
      seen.add(v);
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

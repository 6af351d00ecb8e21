/**
 * What a journal can hold, and errors as journaled data.
 *
 * A value crosses into the journal as JSON, and the body gets the journaled copy back on its first
 * run too, not the original: so the first run and every replay see the same value (a `Date` or a
 * `Map` would come back as something else after a restart; they are refused at the step instead).
 * @module
 */
import { describeThrown } from "@keel/core";
import { NotJournalableError } from "./errors.js";
import type { JournaledError, JsonValue } from "./store/store.js";

const MAX_DEPTH = 64;

/**
 * Checks `value` is JSON that round-trips exactly (plain objects and arrays, finite numbers,
 * strings, booleans, null; an object's `undefined` properties are dropped, as JSON drops them) and
 * returns a copy. Throws {@link NotJournalableError} naming `what` and the path of the first bad part.
 */
export function toJournal(value: unknown, what: string): JsonValue {
  return copyJson(value, what, "", new Set(), 0);
}

function copyJson(value: unknown, what: string, path: string, seen: Set<object>, depth: number): JsonValue {
  const refuse = (rule: string): never => {
    throw new NotJournalableError(what, path === "" ? "the value" : path, rule);
  };
  if (value === null || typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) refuse(`${value} is not JSON (a finite number is)`);
    return value;
  }
  if (typeof value !== "object") refuse(`a ${typeof value} is not JSON`);
  const obj = value as object;
  if (depth > MAX_DEPTH) refuse(`deeper than ${MAX_DEPTH} levels`);
  if (seen.has(obj)) refuse("it refers to itself (a cycle)");
  seen.add(obj);
  try {
    if (Array.isArray(obj)) {
      return obj.map((v, i) => {
        if (v === undefined) refuse(`${path}[${i}] is undefined (JSON would make it null): use null`);
        return copyJson(v, what, `${path}[${i}]`, seen, depth + 1);
      });
    }
    const proto = Object.getPrototypeOf(obj);
    if (proto !== Object.prototype && proto !== null) {
      const kind = (obj as { constructor?: { name?: string } }).constructor?.name ?? "class instance";
      refuse(
        `a ${kind} is not plain JSON (it would come back as a plain object or a string after a ` +
          "restart): journal a plain object, an ISO string for a Date",
      );
    }
    const out: { [key: string]: JsonValue } = {};
    for (const key of Object.keys(obj)) {
      const v = (obj as Record<string, unknown>)[key];
      if (v === undefined) continue;
      out[key] = copyJson(v, what, path === "" ? key : `${path}.${key}`, seen, depth + 1);
    }
    return out;
  } finally {
    seen.delete(obj);
  }
}

/** A step's value as an entry holds it: `undefined` (a step that returns nothing) as null, else `[v]`. */
export function wrapValue(value: unknown, what: string): JsonValue {
  return value === undefined ? null : [toJournal(value, what)];
}

/** The inverse of {@link wrapValue}. */
export function unwrapValue(value: JsonValue): unknown {
  return value === null ? undefined : (value as JsonValue[])[0];
}

const OWN_SKIPPED = new Set(["name", "message", "stack", "code", "cause"]);

/** An error (or any thrown value) as the journal keeps it; never throws. */
export function journalError(thrown: unknown, depth = 0): JournaledError {
  if (!(thrown instanceof Error)) return { name: "Error", message: describeThrown(thrown) };
  const data: { [key: string]: JsonValue } = {};
  for (const key of Object.keys(thrown)) {
    if (OWN_SKIPPED.has(key)) continue;
    try {
      data[key] = toJournal((thrown as unknown as Record<string, unknown>)[key], "error data");
    } catch {
      // A property that is not JSON (a socket, a request) is left out: the error stays readable.
    }
  }
  const code = (thrown as { code?: unknown }).code;
  const cause = (thrown as { cause?: unknown }).cause;
  return {
    name: thrown.name,
    message: thrown.message,
    ...(typeof code === "string" ? { code } : {}),
    ...(typeof thrown.stack === "string" ? { stack: thrown.stack } : {}),
    ...(Object.keys(data).length > 0 ? { data } : {}),
    ...(cause !== undefined && depth < 3 ? { cause: journalError(cause, depth + 1) } : {}),
  };
}

/**
 * The journaled error as an `Error` again: its name, message, code, stack and data, and its cause.
 * A plain `Error` (its class is not kept): code compares by `code`, as Keel's guards do.
 */
export function restoreError(j: JournaledError): Error {
  const e = new Error(j.message, j.cause ? { cause: restoreError(j.cause) } : undefined);
  e.name = j.name;
  if (j.stack !== undefined) e.stack = j.stack;
  if (j.code !== undefined) Object.assign(e, { code: j.code });
  if (j.data) Object.assign(e, j.data);
  return e;
}

/**
 * What a handler threw, made safe to carry: the one place where the worker looks at a value it did
 * not make. Everything after it (`retryOn`, the engines' stores, events, loggers) reads the
 * error's fields; a field that throws, or a value that is no error at all, would otherwise fail the
 * worker at whichever of them met it first.
 * @module
 */

import { types } from "node:util";
import { describeThrown, isCancelled } from "@keel/core";
import { JobThrewError, type ThrownHints } from "./errors.js";

/** Deeper than any reader walks a cause chain (`isTransient` 4, the BullMQ store 3). */
const MAX_DEPTH = 8;
/** An `AggregateError` with more members than this is not walked: it is described instead. */
const MAX_MEMBERS = 1000;
/**
 * The fields the worker, `isTransient`, `isTimeoutError`, the stores and the loggers read of an
 * error or a cause.
 */
const FIELDS = ["code", "status", "statusCode", "retryable", "retryAfterMs", "timeoutMs"] as const;

/**
 * The handler's thrown `value` as the worker carries it from here on: the value itself when it is
 * a `Cancelled` or an ordinary `Error` (identity and `instanceof` kept: nearly every failure), else
 * a {@link JobThrewError} of `queue`/`jobId` that describes it and keeps it on `thrown`.
 *
 * An `Error` is ordinary when reading its `name` and `message` gives strings, its `stack` a string
 * or nothing, and its `code`, `status`, `statusCode`, `retryable`, `retryAfterMs`, `timeoutMs`,
 * `cause` and `errors` read without throwing; the same of each cause and each member of `errors`, down to 8
 * levels (cycles allowed); and when neither it nor any of those is a Proxy (which may answer
 * differently on the next read). Those are read once here (a first read of `stack` makes V8 format
 * it, ~4 µs, which BullMQ and loggers would pay anyway). Odd but readable field values (a BigInt or
 * circular `code`, a huge `message`) are left to each store, which bounds what it writes.
 *
 * Never throws.
 */
export function safeThrown(value: unknown, queue: string, jobId: string): unknown {
  const flaw = flawOf(value);
  if (flaw === null) return value;
  const hints = flaw === "not an error" ? hintsOf(value) : undefined;
  return new JobThrewError(queue, jobId, describeFlaw(value, flaw), value, hints);
}

/**
 * What a thrown object that is not an error says of its retry (`{ status: 503 }`): the fields
 * `isTransient` and the worker read, each kept only when it reads as the right kind; nothing for
 * a value whose reads throw.
 */
function hintsOf(value: unknown): ThrownHints | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  try {
    const o = value as Record<string, unknown>;
    const number = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);
    const { retryable, code } = o;
    return {
      retryable: typeof retryable === "boolean" ? retryable : undefined,
      status: number(o.status),
      statusCode: number(o.statusCode),
      code: typeof code === "string" || typeof code === "number" ? code : undefined,
      retryAfterMs: number(o.retryAfterMs),
    };
  } catch {
    return undefined;
  }
}

/** Why `value` cannot be carried as it is (`stack throws when read`), or null when it can. */
function flawOf(value: unknown): string | null {
  let field = "its prototype";
  try {
    if (types.isProxy(value)) return "proxy";
    if (isCancelled(value)) return null;
    if (!(value instanceof Error)) return "not an error";
    field = "name";
    if (typeof value.name !== "string") return "name is not a string";
    field = "message";
    if (typeof value.message !== "string") return "message is not a string";
    field = "stack";
    const stack: unknown = value.stack;
    if (stack !== undefined && typeof stack !== "string") return "stack is not a string";
    return fieldsFlaw(value, "", 0, null);
  } catch {
    return `${field} throws when read`;
  }
}

/**
 * The first field of `o` (the error, a cause, a member) that throws when read or is a Proxy, as
 * `cause.message throws when read`; null when none. Primitives are fine at any depth.
 */
function fieldsFlaw(o: object, at: string, depth: number, seen: Set<object> | null): string | null {
  if (depth >= MAX_DEPTH) return null;
  const fields = o as Record<string, unknown>;
  let field = "";
  try {
    for (field of FIELDS) void fields[field];
    if (depth > 0) {
      field = "name";
      void fields.name;
      field = "message";
      void fields.message;
    }
    field = "cause";
    const cause = fields.cause;
    field = "errors";
    const errors = fields.errors;
    if (cause === undefined && errors === undefined) return null;
    // Only an error with a cause or members needs the set (which makes a cycle harmless).
    const visited = seen ?? new Set<object>([o]);
    const flaw = nestedFlaw(cause, `${at}cause`, depth, visited);
    if (flaw !== null || errors === undefined) return flaw;
    if (types.isProxy(errors)) return `${at}errors is a Proxy`;
    if (!Array.isArray(errors)) return null;
    if (errors.length > MAX_MEMBERS) return `${at}errors has ${errors.length} members`;
    for (let i = 0; i < errors.length; i++) {
      field = `errors[${i}]`;
      const m = nestedFlaw(errors[i], `${at}errors[${i}]`, depth, visited);
      if (m !== null) return m;
    }
    return null;
  } catch {
    return `${at}${field} throws when read`;
  }
}

function nestedFlaw(v: unknown, at: string, depth: number, seen: Set<object>): string | null {
  if (v === null || (typeof v !== "object" && typeof v !== "function")) return null;
  if (types.isProxy(v)) return `${at} is a Proxy`;
  if (seen.has(v)) return null;
  seen.add(v);
  return fieldsFlaw(v, `${at}.`, depth + 1, seen);
}

/** `value` in words, bounded: what it is, then what it holds where that can be read. */
function describeFlaw(value: unknown, flaw: string): string {
  if (flaw === "proxy") return "a Proxy";
  if (flaw === "not an error") return describeNonError(value);
  // An error that cannot be read: its class from the prototype chain (no getter of its own runs).
  return `${articled(className(value) ?? "Error")} whose ${flaw}: ${describeThrown(value)}`;
}

function describeNonError(value: unknown): string {
  switch (typeof value) {
    case "undefined":
      return "undefined";
    case "object": {
      if (value === null) return "null";
      const name = className(value);
      const kind =
        name === null
          ? "a null-prototype object"
          : name === "Object" || name === undefined
            ? "an object"
            : articled(name);
      return `${kind} ${describeThrown(value)}`;
    }
    case "function":
      return `a function ${describeThrown(value)}`;
    default:
      return `${articled(typeof value)} ${describeThrown(value)}`;
  }
}

/**
 * The name of `value`'s class, read from its prototype's own `constructor` data property (no
 * getter runs); null for a null prototype, undefined when it cannot be told.
 */
function className(value: unknown): string | null | undefined {
  try {
    const proto = Object.getPrototypeOf(value);
    if (proto === null) return null;
    const d = Object.getOwnPropertyDescriptor(proto, "constructor");
    const ctor: unknown = d?.value;
    if (typeof ctor !== "function") return undefined;
    const n = Object.getOwnPropertyDescriptor(ctor, "name")?.value;
    return typeof n === "string" && n !== "" ? n.slice(0, 60) : undefined;
  } catch {
    return undefined;
  }
}

function articled(word: string): string {
  return `${/^[aeiou]/i.test(word) ? "an" : "a"} ${word}`;
}

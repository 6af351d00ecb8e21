/**
 * Checking route scripts and normalizing them into steps; matching requests to routes.
 * @module
 */
/** A response head with defaults applied; header names lower-cased. */
export interface Head {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[]>>;
}

/** A behaviour checked and normalized, ready to perform. */
export type Step =
  | { readonly kind: "respond"; readonly delayMs: number; readonly head: Head; readonly body: Buffer }
  | { readonly kind: "hang-before-headers" }
  | { readonly kind: "hang-after-headers"; readonly delayMs: number; readonly head: Head }
  | {
      readonly kind: "drip";
      readonly delayMs: number;
      readonly head: Head;
      readonly chunk: Buffer;
      readonly everyMs: number;
      readonly count: number;
    }
  | { readonly kind: "reset-before-headers"; readonly delayMs: number }
  | { readonly kind: "reset-after-headers"; readonly delayMs: number; readonly head: Head }
  | {
      readonly kind: "reset-mid-body";
      readonly delayMs: number;
      readonly head: Head;
      readonly afterBytes: number;
    }
  | { readonly kind: "close"; readonly delayMs: number };

/** The route a request matched: its key, which request to it this is (from 0), and the step. */
export interface RouteMatch {
  readonly key: string;
  readonly index: number;
  readonly step: Step;
}

/** The parsed routes; `next` picks the step for a request and counts it. */
export interface RouteTable {
  next(method: string, pathname: string): RouteMatch | null;
}

const HEAD_FIELDS = ["status", "headers", "retryAfter"];

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean" || value == null) return String(value);
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : typeof value;
}

function fail(where: string, expected: string, got: unknown, range = false): never {
  const message = `${where}: expected ${expected}, got ${describe(got)}`;
  throw range ? new RangeError(message) : new TypeError(message);
}

function duration(where: string, value: unknown): number {
  if (value === undefined) return 0;
  if (typeof value !== "number") fail(where, "a finite number ≥ 0", value);
  if (!Number.isFinite(value) || value < 0) fail(where, "a finite number ≥ 0", value, true);
  return value;
}

function byteCount(where: string, value: unknown, min: number): number {
  if (typeof value !== "number") fail(where, `an integer ≥ ${min}`, value);
  if (!Number.isInteger(value) || value < min) fail(where, `an integer ≥ ${min}`, value, true);
  return value;
}

function checkFields(where: string, b: Record<string, unknown>, allowed: readonly string[]): void {
  for (const field of Object.keys(b)) {
    if (!allowed.includes(field))
      throw new TypeError(
        `${where}.${field}: not a field of this behaviour (allowed: ${allowed.join(", ")})`,
      );
  }
}

function parseHead(where: string, b: Record<string, unknown>, defaults: Record<string, string> = {}): Head {
  let status = 200;
  if (b.status !== undefined) {
    if (typeof b.status !== "number") fail(`${where}.status`, "an integer from 100 to 999", b.status);
    if (!Number.isInteger(b.status) || b.status < 100 || b.status > 999)
      fail(`${where}.status`, "an integer from 100 to 999", b.status, true);
    status = b.status;
  }
  const headers: Record<string, string | string[]> = { ...defaults };
  const ra = b.retryAfter;
  if (ra !== undefined) {
    if (typeof ra === "string") headers["retry-after"] = ra;
    else if (typeof ra === "number") headers["retry-after"] = String(byteCount(`${where}.retryAfter`, ra, 0));
    else if (ra instanceof Date && !Number.isNaN(ra.getTime())) headers["retry-after"] = ra.toUTCString();
    else fail(`${where}.retryAfter`, "delay-seconds, a valid Date or a string", ra);
  }
  if (b.headers !== undefined) {
    if (typeof b.headers !== "object" || b.headers === null || Array.isArray(b.headers))
      fail(`${where}.headers`, "an object of header values", b.headers);
    for (const [name, value] of Object.entries(b.headers as Record<string, unknown>)) {
      if (typeof value === "string" || typeof value === "number") headers[name.toLowerCase()] = String(value);
      else if (Array.isArray(value) && value.every((v) => typeof v === "string"))
        headers[name.toLowerCase()] = [...value];
      else
        fail(`${where}.headers[${JSON.stringify(name)}]`, "a string, a number or an array of strings", value);
    }
  }
  return { status, headers };
}

function parseBody(where: string, b: Record<string, unknown>): { body: Buffer; type?: string } {
  if (b.json !== undefined && b.body !== undefined)
    throw new TypeError(`${where}: give json or body, not both`);
  if (b.json !== undefined) {
    const text = JSON.stringify(b.json);
    if (text === undefined) fail(`${where}.json`, "a JSON-serializable value", b.json);
    return { body: Buffer.from(text), type: "application/json" };
  }
  if (b.body === undefined) return { body: Buffer.alloc(0) };
  if (typeof b.body === "string") return { body: Buffer.from(b.body), type: "text/plain; charset=utf-8" };
  if (b.body instanceof Uint8Array) return { body: Buffer.from(b.body) };
  return fail(`${where}.body`, "a string or a Uint8Array", b.body);
}

/** Checks one behaviour and normalizes it; `where` names it in error messages. */
export function parseBehaviour(where: string, raw: unknown): Step {
  if (typeof raw === "number") return parseBehaviour(where, { status: raw });
  if (typeof raw !== "object" || raw === null || Array.isArray(raw))
    fail(where, "a status number or a behaviour object", raw);
  const b = raw as Record<string, unknown>;
  const kinds = ["hang", "drip", "reset", "close"].filter((k) => b[k] !== undefined);
  if (kinds.length > 1) throw new TypeError(`${where}: one behaviour at a time, got ${kinds.join(" and ")}`);
  const delay = () => duration(`${where}.delayMs`, b.delayMs);
  switch (kinds[0]) {
    case undefined: {
      checkFields(where, b, [...HEAD_FIELDS, "json", "body", "delayMs"]);
      const { body, type } = parseBody(where, b);
      const head = parseHead(where, b, type ? { "content-type": type } : {});
      return { kind: "respond", delayMs: delay(), head, body };
    }
    case "hang":
      if (b.hang === "before-headers") {
        checkFields(where, b, ["hang"]);
        return { kind: "hang-before-headers" };
      }
      if (b.hang !== "after-headers") fail(`${where}.hang`, '"before-headers" or "after-headers"', b.hang);
      checkFields(where, b, ["hang", "delayMs", ...HEAD_FIELDS]);
      return { kind: "hang-after-headers", delayMs: delay(), head: parseHead(where, b) };
    case "drip": {
      checkFields(where, b, ["drip", "delayMs", "headersDelayMs", ...HEAD_FIELDS]);
      if (b.delayMs !== undefined && b.headersDelayMs !== undefined)
        throw new TypeError(`${where}: give delayMs or headersDelayMs (the same thing), not both`);
      const d = b.drip as Record<string, unknown>;
      if (typeof d !== "object" || d === null) fail(`${where}.drip`, "{ chunk, everyMs, count }", d);
      checkFields(`${where}.drip`, d, ["chunk", "everyMs", "count"]);
      let chunk: Buffer;
      if (typeof d.chunk === "string" && d.chunk.length > 0) chunk = Buffer.from(d.chunk);
      else if (typeof d.chunk === "number")
        chunk = Buffer.alloc(byteCount(`${where}.drip.chunk`, d.chunk, 1), "x");
      else fail(`${where}.drip.chunk`, "a non-empty string or a byte count ≥ 1", d.chunk);
      if (d.everyMs === undefined) fail(`${where}.drip.everyMs`, "a finite number ≥ 0", d.everyMs);
      const everyMs = duration(`${where}.drip.everyMs`, d.everyMs);
      const count = d.count === Infinity ? Infinity : byteCount(`${where}.drip.count`, d.count, 0);
      if (count === Infinity && everyMs === 0)
        fail(`${where}.drip.everyMs`, "a number > 0 when count is Infinity", everyMs, true);
      const length: Record<string, string> =
        count === Infinity ? {} : { "content-length": String(count * chunk.length) };
      const delayMs = duration(`${where}.headersDelayMs`, b.headersDelayMs ?? b.delayMs);
      return { kind: "drip", delayMs, head: parseHead(where, b, length), chunk, everyMs, count };
    }
    case "reset":
      if (b.reset === "before-headers") {
        checkFields(where, b, ["reset", "delayMs"]);
        return { kind: "reset-before-headers", delayMs: delay() };
      }
      if (b.reset === "after-headers") {
        checkFields(where, b, ["reset", "delayMs", ...HEAD_FIELDS]);
        return { kind: "reset-after-headers", delayMs: delay(), head: parseHead(where, b) };
      }
      if (b.reset === "mid-body") {
        checkFields(where, b, ["reset", "afterBytes", "totalBytes", "delayMs", ...HEAD_FIELDS]);
        const afterBytes = byteCount(`${where}.afterBytes`, b.afterBytes, 0);
        const total =
          b.totalBytes === undefined
            ? afterBytes + 1024
            : byteCount(`${where}.totalBytes`, b.totalBytes, afterBytes + 1);
        const head = parseHead(where, b, { "content-length": String(total) });
        return { kind: "reset-mid-body", delayMs: delay(), head, afterBytes };
      }
      return fail(`${where}.reset`, '"before-headers", "after-headers" or "mid-body"', b.reset);
    default:
      if (b.close !== "without-response") fail(`${where}.close`, '"without-response"', b.close);
      checkFields(where, b, ["close", "delayMs"]);
      return { kind: "close", delayMs: delay() };
  }
}

const KEY = /^(?:\*|\/\S*|[A-Za-z]+ \/\S*)$/;

/**
 * Checks every route and returns the table that matches requests: `"METHOD /path"` first, then
 * `"/path"`, then `"*"`; the path is compared without its query string.
 */
export function parseRoutes(routes: unknown, where = "createFaultServer(routes)"): RouteTable {
  if (typeof routes !== "object" || routes === null || Array.isArray(routes))
    fail(where, "an object of route scripts", routes);
  const table = new Map<string, { steps: Step[]; served: number }>();
  for (const [rawKey, script] of Object.entries(routes)) {
    const at = `${where}[${JSON.stringify(rawKey)}]`;
    if (!KEY.test(rawKey) || rawKey.includes("?"))
      throw new TypeError(`${at}: a route is "/path", "METHOD /path" or "*", without a query string`);
    const space = rawKey.indexOf(" ");
    const key = space > 0 ? `${rawKey.slice(0, space).toUpperCase()}${rawKey.slice(space)}` : rawKey;
    if (table.has(key)) throw new TypeError(`${at}: the route ${key} is given twice`);
    let steps: Step[];
    if (Array.isArray(script)) {
      if (script.length === 0) fail(at, "a behaviour or a non-empty array of behaviours", script, true);
      steps = script.map((b, i) => parseBehaviour(`${at}[${i}]`, b));
    } else {
      steps = [parseBehaviour(at, script)];
    }
    table.set(key, { steps, served: 0 });
  }
  return {
    next(method, pathname) {
      for (const key of [`${method.toUpperCase()} ${pathname}`, pathname, "*"]) {
        const route = table.get(key);
        if (!route) continue;
        const index = route.served++;
        return { key, index, step: route.steps[Math.min(index, route.steps.length - 1)]! };
      }
      return null;
    },
  };
}

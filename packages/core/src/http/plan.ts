/**
 * Checking a client's options, and turning each call into a {@link RequestPlan}.
 * @module
 */
import type { Dispatcher } from "undici";
import { checkDurationMs, checkOptions, invalidRange, invalidType } from "../errors.js";
import type { Clock } from "../kernel/clock.js";
import { checkRetryPolicy, type RetryPolicy } from "../resilience/retry.js";
import { type ConnectionBook, originKey } from "./connections.js";
import type { HttpAttemptHook, HttpClientOptions, HttpTimeouts, RequestOptions } from "./options.js";

/** Everything a request needs, validated when the request was made. */
export interface RequestPlan {
  readonly agent: Dispatcher;
  readonly connections: ConnectionBook;
  readonly clock: Clock;
  /** `GET /orders?page=2`: the method, path and query, as errors and the task tree name it. */
  readonly label: string;
  readonly href: string;
  readonly origin: string;
  /** The path and query, as sent. */
  readonly path: string;
  /** The origin as `host:port`: the key of the connection books and of the clock's holds. */
  readonly holdKey: string;
  readonly method: string;
  /** Never mutated: it may be shared by every call of the client. */
  readonly headers: Record<string, string>;
  readonly body: string | Uint8Array | null;
  readonly keepAlive: boolean;
  readonly timeouts: Required<HttpTimeouts>;
  readonly retry: RetryPolicy | false;
  /** GET/PUT/DELETE…, or any method with an idempotency key: safe to send twice. */
  readonly idempotent: boolean;
  readonly expect: (status: number) => boolean;
  readonly deadlineHeader: string | false;
  /** `response`: hand the response to the caller; `json`: read and parse it within the attempt. */
  readonly mode: "response" | "json";
  /** The largest body read whole, in bytes. */
  readonly maxResponseBytes: number;
  readonly around: HttpAttemptHook | null;
}

/**
 * 64 MiB: far above an API's answer, yet a body that is not one (a misrouted download, a runaway
 * export) fails instead of taking the heap, which a buffered read needs about twice of.
 */
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

export const DEFAULT_TIMEOUTS: Required<HttpTimeouts> = {
  connectMs: 10_000,
  headersMs: 30_000,
  bodyIdleMs: 30_000,
  totalMs: 60_000,
};

/** A client's options, checked once. */
export interface ClientBase {
  readonly baseUrl: URL | null;
  /** The client's headers with lowercased names (the form requests merge theirs into). */
  readonly headers: Record<string, string>;
  readonly keepAlive: boolean;
  readonly timeouts: Required<HttpTimeouts>;
  readonly retry: RetryPolicy | false;
  readonly deadlineHeader: string | false;
  readonly maxResponseBytes: number;
  readonly around: HttpAttemptHook | null;
}

/** A live client: its options and pool, and the targets its paths resolved to. */
export interface ClientState extends ClientBase {
  readonly agent: Dispatcher;
  readonly connections: ConnectionBook;
  readonly clock: Clock;
  /** Resolved paths without a query: parsing a URL is a good part of a request's own cost. */
  readonly targets: Map<string, Target>;
}

interface Target {
  readonly href: string;
  readonly origin: string;
  readonly path: string;
  readonly holdKey: string;
}

/** Bounds the memory of clients that call ever-new paths (`/orders/1`, `/orders/2`…). */
const MAX_TARGETS = 256;

export function checkClientOptions(options: HttpClientOptions): ClientBase {
  const o = checkOptions("createHttpClient(options)", options) ?? {};
  let baseUrl: URL | null = null;
  if (o.baseUrl !== undefined) {
    if (typeof o.baseUrl !== "string")
      throw invalidType("createHttpClient({ baseUrl })", "an absolute http(s) URL", o.baseUrl);
    try {
      baseUrl = new URL(o.baseUrl);
    } catch {
      throw invalidType("createHttpClient({ baseUrl })", "an absolute http(s) URL", o.baseUrl);
    }
    if (!/^https?:$/.test(baseUrl.protocol))
      throw invalidType("createHttpClient({ baseUrl })", "an http(s) URL", o.baseUrl);
  }
  if (o.around !== undefined && typeof o.around !== "function")
    throw invalidType("createHttpClient({ around })", "a function (attempt, info) => operation", o.around);
  const d = o.dispatcher as { dispatch?: unknown } | undefined;
  if (d !== undefined && (typeof d !== "object" || d === null || typeof d.dispatch !== "function"))
    throw invalidType("createHttpClient({ dispatcher })", "an undici Dispatcher", o.dispatcher);
  const c = o.connections;
  if (c !== undefined && (typeof c !== "number" || !Number.isInteger(c) || c < 1)) {
    throw invalidRange("createHttpClient({ connections })", "a whole number ≥ 1", c);
  }
  if (o.keepAlive !== undefined && typeof o.keepAlive !== "boolean")
    throw invalidType("createHttpClient({ keepAlive })", "a boolean", o.keepAlive);
  const { deadlineHeader } = o;
  if (
    deadlineHeader !== undefined &&
    deadlineHeader !== false &&
    (typeof deadlineHeader !== "string" || !deadlineHeader)
  )
    throw invalidType("createHttpClient({ deadlineHeader })", "a header name or false", deadlineHeader);
  if (o.retry !== undefined && o.retry !== false) checkRetryPolicy("createHttpClient({ retry: ", o.retry);
  // Header names are case-insensitive: merged lowercased, so a request's `x-a` replaces the
  // client's `X-A` instead of sending both.
  const headers: Record<string, string> = {};
  for (const [k, v] of headerEntries("createHttpClient(", o.headers)) headers[k.toLowerCase()] = v;
  return {
    baseUrl,
    headers,
    keepAlive: o.keepAlive ?? true,
    timeouts: { ...DEFAULT_TIMEOUTS, ...checkTimeouts("createHttpClient(", o.timeouts) },
    retry: o.retry ?? {},
    deadlineHeader: o.deadlineHeader ?? false,
    maxResponseBytes: checkMaxBytes("createHttpClient({ maxResponseBytes })", o.maxResponseBytes),
    around: o.around ?? null,
  };
}

function checkMaxBytes(where: string, n: number | undefined): number {
  if (n === undefined) return DEFAULT_MAX_RESPONSE_BYTES;
  if (typeof n !== "number" || !(Number.isInteger(n) || n === Infinity) || n < 0)
    throw invalidRange(where, "a whole number of bytes ≥ 0, or Infinity", n);
  return n;
}

/**
 * Checks the timeouts given where `open` says (`"createHttpClient("`, `"request(path, "`), naming
 * each as written: `createHttpClient({ timeouts: { headersMs } })`.
 */
export function checkTimeouts(open: string, t: HttpTimeouts | undefined): HttpTimeouts {
  const timeouts = checkOptions(`${open}{ timeouts })`, t);
  if (timeouts === undefined) return {};
  for (const k of ["connectMs", "headersMs", "bodyIdleMs", "totalMs"] as const) {
    if (timeouts[k] !== undefined) checkDurationMs(`${open}{ timeouts: { ${k} } })`, timeouts[k]);
  }
  return timeouts;
}

/** The entries of a headers option given where `open` says: an object whose values are strings. */
function headerEntries(open: string, headers: Record<string, string> | undefined): [string, string][] {
  const entries = Object.entries(checkOptions(`${open}{ headers })`, headers) ?? {});
  for (const [name, value] of entries) {
    if (typeof value !== "string")
      throw invalidType(`${open}{ headers: { ${JSON.stringify(name)} } })`, "a string", value);
  }
  return entries;
}

/** Checks a call's options (the client's checks were made once, at `createHttpClient`). */
function checkRequestOptions(options: RequestOptions): RequestOptions {
  const o = checkOptions("request(path, options)", options) ?? {};
  const at = (option: string) => `request(path, { ${option} })`;
  if (o.method !== undefined && (typeof o.method !== "string" || !o.method))
    throw invalidType(at("method"), "an HTTP method name", o.method);
  if (o.body !== undefined && typeof o.body !== "string" && !(o.body instanceof Uint8Array))
    throw invalidType(at("body"), "a string or a Uint8Array", o.body);
  if (o.idempotencyKey !== undefined && typeof o.idempotencyKey !== "string")
    throw invalidType(at("idempotencyKey"), "a string", o.idempotencyKey);
  if (o.expect !== undefined && o.expect !== false && typeof o.expect !== "function")
    throw invalidType(at("expect"), "a function of the status, or false", o.expect);
  if (o.retry !== undefined && o.retry !== false) checkRetryPolicy("request(path, { retry: ", o.retry);
  for (const [k, v] of Object.entries(checkOptions(at("query"), o.query) ?? {})) {
    if (v !== undefined && typeof v !== "string" && typeof v !== "number" && typeof v !== "boolean")
      throw invalidType(
        `request(path, { query: { ${JSON.stringify(k)} } })`,
        "a string, number or boolean",
        v,
      );
  }
  return o;
}

const below400 = (s: number) => s < 400;
const is2xx = (s: number) => s >= 200 && s < 300;
const always = () => true;

/**
 * The plan of one call. `method` (a verb's, or getJson's GET) replaces `o.method`; a `json` call
 * accepts only 2xx.
 */
export function planFor(
  client: ClientState,
  path: string,
  options: RequestOptions,
  method: string | undefined,
  mode: "response" | "json",
): RequestPlan {
  const o = checkRequestOptions(options);
  const target = targetOf(client, path, o.query);
  if (o.body !== undefined && o.json !== undefined)
    throw invalidType("request(path, { body, json })", "either body or json, not both", "both");
  const timeouts =
    o.timeouts === undefined
      ? client.timeouts
      : ({
          ...client.timeouts,
          ...checkTimeouts("request(path, ", o.timeouts),
        } as Required<HttpTimeouts>);
  let headers = client.headers;
  let body: string | Uint8Array | null = o.body ?? null;
  if (o.headers !== undefined || o.json !== undefined || o.idempotencyKey !== undefined) {
    headers = { ...client.headers };
    for (const [k, v] of headerEntries("request(path, ", o.headers)) headers[k.toLowerCase()] = v;
    if (o.json !== undefined) {
      body = JSON.stringify(o.json);
      headers["content-type"] ??= "application/json";
    }
    if (o.idempotencyKey !== undefined) headers["idempotency-key"] = o.idempotencyKey;
  }
  const verb = (method ?? o.method ?? "GET").toUpperCase();
  return {
    agent: client.agent,
    connections: client.connections,
    clock: client.clock,
    label: `${verb} ${target.path}`,
    href: target.href,
    origin: target.origin,
    path: target.path,
    holdKey: target.holdKey,
    method: verb,
    headers,
    body,
    keepAlive: client.keepAlive,
    timeouts,
    retry: o.retry ?? client.retry,
    idempotent: o.idempotencyKey !== undefined || (verb !== "POST" && verb !== "PATCH"),
    expect: mode === "json" ? is2xx : o.expect === false ? always : (o.expect ?? below400),
    deadlineHeader: client.deadlineHeader,
    mode,
    maxResponseBytes:
      o.maxResponseBytes === undefined
        ? client.maxResponseBytes
        : checkMaxBytes("request(path, { maxResponseBytes })", o.maxResponseBytes),
    around: client.around,
  };
}

function targetOf(client: ClientState, path: string, query: RequestOptions["query"]): Target {
  if (typeof path !== "string") throw invalidType("request(path)", "a string", path);
  const cached = query === undefined ? client.targets.get(path) : undefined;
  if (cached) return cached;
  const { baseUrl } = client;
  let url: URL;
  try {
    url = baseUrl ? new URL(path, baseUrl) : new URL(path);
  } catch {
    throw invalidType(
      "request(path)",
      baseUrl ? "a path or URL" : "an absolute URL (no baseUrl is set)",
      path,
    );
  }
  if (!/^https?:$/.test(url.protocol)) throw invalidType("request(path)", "an http(s) URL", path);
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
  const target: Target = {
    href: url.href,
    origin: url.origin,
    path: `${url.pathname}${url.search}`,
    holdKey: originKey(url.hostname, url.port, url.protocol),
  };
  if (query === undefined) {
    if (client.targets.size >= MAX_TARGETS) client.targets.clear();
    client.targets.set(path, target);
  }
  return target;
}

/**
 * `@keel/core/http`: HTTP over undici with phased Keel timeouts, deadlines and retries by status.
 * @module @keel/core/http
 */
export type { HttpClient } from "./client.js";
export { createHttpClient } from "./client.js";
export type { HttpPhase } from "./errors.js";
export {
  BodyReleasedError,
  HttpError,
  HttpResponseTooLargeError,
  HttpTimeoutError,
  httpTimeoutCodes,
  isHttpError,
} from "./errors.js";
export type {
  HttpAttemptHook,
  HttpAttemptInfo,
  HttpClientOptions,
  HttpTimeouts,
  RequestOptions,
} from "./options.js";
export type { HttpResponse } from "./response.js";
export { parseRetryAfter } from "./retry-after.js";
export type { HttpClientStats, HttpPoolStats } from "./stats.js";

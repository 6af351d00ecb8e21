/**
 * `@keel/core/http`: HTTP over undici with phased Keel timeouts, deadlines and retries by status.
 * @module @keel/core/http
 */
export type { HttpClient, HttpClientOptions, HttpTimeouts, RequestOptions } from "./client.js";
export { createHttpClient } from "./client.js";
export type { HttpPhase } from "./errors.js";
export { BodyReleasedError, HttpError, HttpTimeoutError, httpTimeoutCodes, isHttpError } from "./errors.js";
export type { HttpResponse } from "./response.js";
export { parseRetryAfter } from "./retry-after.js";

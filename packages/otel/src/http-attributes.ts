/**
 * The stable HTTP semantic conventions' attributes of a client request.
 * @module
 */

/**
 * `http.request.method`, `server.address`, `server.port`, and `url.full` on spans (metrics leave
 * the URL out: it would give every path its own series).
 */
export function httpAttributes(
  method: string,
  url: string,
  withUrl: boolean,
): Record<string, string | number> {
  const attributes: Record<string, string | number> = { "http.request.method": method };
  try {
    const u = new URL(url);
    attributes["server.address"] = u.hostname;
    attributes["server.port"] = u.port ? Number(u.port) : u.protocol === "https:" ? 443 : 80;
  } catch {}
  if (withUrl) attributes["url.full"] = url;
  return attributes;
}

/** `error.type` for a failed attempt: the status for an HTTP error, else the error's name. */
export function httpErrorType(error: unknown): string {
  const status = (error as { status?: unknown } | null)?.status;
  if (typeof status === "number") return String(status);
  const name = (error as { name?: unknown } | null)?.name;
  return typeof name === "string" && name.length > 0 ? name : "_OTHER";
}

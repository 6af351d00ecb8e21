/**
 * The demo's flaky HTTP API: the fault server from `@keel/testing`, with one route per kind of
 * trouble, and a deterministic pick of the route for each delivery of each job.
 * @module
 */
import type { RouteScript } from "@keel/testing";

/** What each route does; the weights are out of 1000. */
export const routes: Readonly<Record<string, RouteScript>> = {
  "/ok": { status: 200, json: { ok: true } },
  "/slow": { status: 200, json: { ok: true }, delayMs: 100 },
  "/busy": { status: 503, retryAfter: 1, json: { error: "busy" } },
  "/reset": { reset: "before-headers", delayMs: 5 },
  "/hang": { hang: "before-headers" },
  "/invalid": { status: 422, json: { error: "invalid order" } },
};

const weights: readonly [string, number][] = [
  ["/ok", 700],
  ["/slow", 120],
  ["/busy", 80],
  ["/reset", 60],
  ["/hang", 25],
  ["/invalid", 15],
];

/** The route a delivery calls: a hash of the job's id and attempt, so a retry may land elsewhere. */
export function routeFor(jobId: string, attempt: number): string {
  let h = 2166136261;
  for (const c of `${jobId}#${attempt}`) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
  let pick = (h >>> 0) % 1000;
  for (const [route, weight] of weights) {
    if (pick < weight) return route;
    pick -= weight;
  }
  return "/ok";
}

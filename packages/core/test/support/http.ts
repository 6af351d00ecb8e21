/**
 * Socket bookkeeping for tests that run a real fault server and HTTP client: counting this
 * process's TCP handles, letting real I/O catch up, and the leak check.
 * @module
 */
import type { FaultServer, Harness } from "@keel/testing";
import { beforeEach, expect } from "vitest";

/** How many of this process's active resources there are of each kind in `watched`. */
export function countHandles(watched: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo()) if (watched.includes(r)) counts[r] = (counts[r] ?? 0) + 1;
  return counts;
}

/** Lets real I/O callbacks run (node closes a destroyed socket's handle a turn later), until `done()` holds or a bounded number of turns passed. */
export async function settle(done: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !done(); i++) await new Promise((r) => setImmediate(r));
}

/**
 * Waits, at most `boundMs` of real time, for a server's set of open sockets to empty (the peer sees a
 * close a moment after the client destroys its end); returns how many are left.
 */
export async function openSocketsAfter(open: ReadonlySet<unknown>, boundMs: number): Promise<number> {
  const until = Date.now() + boundMs;
  while (open.size > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
  return open.size;
}

/**
 * Registers a `beforeEach` that waits for a previous test's sockets to finish closing and takes the
 * handle counts of `watched` as the baseline; returns the counter and the leak check against it.
 */
export function socketBookkeeping(watched: readonly string[]) {
  const handles = () => countHandles(watched);
  let baseline: Record<string, number> = {};
  beforeEach(async () => {
    // A previous test's sockets may still be closing: let them finish first.
    let last = "";
    for (let i = 0; i < 50; i++) {
      await new Promise((r) => setImmediate(r));
      const now = JSON.stringify(handles());
      if (now === last && i > 5) break;
      last = now;
    }
    baseline = handles();
  });
  /** The leak check: no task, no timer, no server socket, no watched handle left behind. */
  async function expectAllClosed(h: Harness, server: FaultServer): Promise<void> {
    await h.expectClean();
    await settle(() => JSON.stringify(handles()) === JSON.stringify(baseline));
    expect(server.openSockets).toBe(0);
    expect(server.connections.filter((c) => c.closedAt === null)).toEqual([]);
    expect(handles()).toEqual(baseline);
  }
  return { handles, expectAllClosed };
}

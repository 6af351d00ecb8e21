/**
 * The task tree explains a stuck process: each wait's detail (sleep, semaphore, HTTP, join, worker
 * job), and a cancelled task still unwinding, with how long and when it is cut.
 */
import {
  createSemaphore,
  formatTaskTree,
  run,
  sleep,
  snapshot,
  spawn,
  suspend,
  type TaskSnapshot,
} from "@keel/core";
import { createVirtualClock } from "@keel/testing";
import { describe, expect, it } from "vitest";

const turn = () => new Promise((resolve) => setImmediate(resolve));

function find(s: TaskSnapshot, name: string): TaskSnapshot {
  if (s.name === name) return s;
  for (const c of s.children) {
    try {
      return find(c, name);
    } catch {}
  }
  throw new Error(`no task ${name}`);
}

describe("snapshot: what each task waits on, as data", () => {
  it("a sleep gives its wake time; the tree says when it wakes", async () => {
    const clock = createVirtualClock({ autojump: false });
    const root = run(
      function* server() {
        yield* spawn(function* poll() {
          yield* sleep(5000);
        });
        yield* suspend();
      },
      { clock },
    );
    await turn();
    clock.advance(1500);
    const s = snapshot(root);
    expect(find(s, "poll").waitDetail).toEqual({ kind: "sleep", ms: 5000, until: 5000 });
    expect(formatTaskTree(s)).toMatch(
      /poll#\d+ running 1\.5s, waiting on sleep\(5000\) for 1\.5s, wakes in 3\.5s/,
    );
    await root.cancel();
  });

  it("a semaphore waiter gives the semaphore's name and its place in the queue", async () => {
    const clock = createVirtualClock({ autojump: false });
    const db = createSemaphore(1, { name: "db" });
    const root = run(
      function* server() {
        yield* spawn(function* holder() {
          yield* db.use(() => sleep(5000));
        });
        const first = yield* spawn(function* first() {
          yield* db.use(() => sleep(10));
        });
        yield* spawn(function* second() {
          yield* db.use(() => sleep(10));
        });
        yield* sleep(1);
        yield* first.cancel();
        yield* spawn(function* third() {
          yield* db.use(() => sleep(10));
        });
        yield* suspend();
      },
      { clock },
    );
    await turn();
    clock.advance(1);
    await turn();
    const s = snapshot(root);
    // `first` left the queue: `second` is next, `third` after it.
    expect(find(s, "second").waitDetail).toEqual({ kind: "semaphore", name: "db", position: 1, waiting: 2 });
    expect(find(s, "third").waitDetail).toEqual({ kind: "semaphore", name: "db", position: 2, waiting: 2 });
    expect(formatTaskTree(s)).toMatch(
      /third#\d+ running .*waiting on semaphore db: 2 waiting for .*, 2nd in the queue/,
    );
    await root.cancel();
  });

  it("a join gives the task joined", async () => {
    const clock = createVirtualClock({ autojump: false });
    let childId = 0;
    const root = run(
      function* server() {
        const child = yield* spawn(function* child() {
          yield* suspend();
        });
        childId = child.id;
        yield* spawn(function* joiner() {
          yield* child;
        });
        yield* suspend();
      },
      { clock },
    );
    await turn();
    expect(find(snapshot(root), "joiner").waitDetail).toEqual({
      kind: "join",
      taskId: childId,
      name: "child",
    });
    await root.cancel();
  });

  it("a cancelled task still unwinding says since when, why, and when its budget cuts it", async () => {
    const clock = createVirtualClock({ autojump: false });
    const root = run(
      function* server() {
        const w = yield* spawn(function* worker() {
          try {
            yield* suspend();
          } finally {
            yield* sleep(60_000);
          }
        });
        yield* sleep(100);
        w.cancel("draining");
        yield* suspend();
      },
      { clock, cleanupBudgetMs: 5000 },
    );
    await turn();
    clock.advance(100);
    await turn();
    clock.advance(1200);
    const s = snapshot(root);
    const worker = find(s, "worker");
    expect(worker.state).toBe("cancelling");
    expect(worker.unwinding).toEqual({
      forMs: 1200,
      reason: expect.objectContaining({ kind: "cancel", message: "draining" }),
      cutInMs: 3800,
    });
    expect(find(s, "server").unwinding).toBeNull();
    expect(formatTaskTree(s)).toMatch(
      /worker#\d+ cancelling 1\.3s, deadline in 3\.8s, waiting on sleep\(60000\) for 1\.2s, wakes in 58\.8s, unwinding for 1\.2s \(cancel: draining\), cut in 3\.8s/,
    );
    const stopped = root.cancel();
    await turn();
    clock.advance(5000);
    await stopped;
  });
});

/**
 * What the fault tests share (`redis-faults*.test.ts`): a condition wait with a hang guard, a
 * worker served in a task of its own that records the jobs it ran, and the `worker:engine` states
 * seen.
 */
import { type KeelEvent, type Operation, sleep, spawn, suspend, type Task } from "@keel/core";
import { type Queue, useWorker, type Worker, type WorkerOptions } from "@keel/worker";

/** Waits until `ready()` holds, polling every 20 ms; `what` names it if the hang guard trips. */
export function* eventually(
  what: string,
  ready: () => boolean | Operation<boolean>,
  guardMs = 30_000,
): Generator<unknown, void, unknown> {
  const from = Date.now();
  for (;;) {
    const r = ready();
    if (typeof r === "boolean" ? r : yield* r) return;
    if (Date.now() - from > guardMs) throw new Error(`hang guard: still waiting for ${what}`);
    yield* sleep(20);
  }
}

export interface Service {
  readonly task: Task<void>;
  readonly worker: () => Worker;
  readonly ran: string[];
}

/** A worker over `queue` in a task of its own; its handler records each job it runs. */
export function* serve(
  queue: Queue<string>,
  options: WorkerOptions<string>,
  handle: (id: string) => Operation<void> = function* () {},
): Generator<unknown, Service, unknown> {
  const ran: string[] = [];
  let worker: Worker | null = null;
  const task = yield* spawn(function* service() {
    worker = yield* useWorker(
      queue,
      function* handler(job) {
        ran.push(job.id);
        yield* handle(job.id);
      },
      options,
    );
    yield* suspend();
  });
  yield* eventually("the worker", () => worker !== null);
  return { task, worker: () => worker as unknown as Worker, ran };
}

/** The `worker:engine` states seen, in order. */
export function engineEvents(events: KeelEvent[]): string[] {
  return events.flatMap((e) => (e.type === "worker:engine" ? [e.state] : []));
}

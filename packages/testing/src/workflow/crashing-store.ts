/**
 * A store that "dies" at a chosen journal entry, as a process killed there would: the entry is not
 * written, and from then on every write of this "process" fails and it claims nothing. Its claim
 * stays until its lease ends, as a dead process's does; then another engine replays the execution.
 * @module
 */
import type { JournalEntry, WorkflowStore } from "@keel/workflow";

/**
 * What {@link crashingStore} returns: the store to give the engine that is to "die", and when it did.
 *
 * @example
 * ```ts
 * import { run, scoped, sleep, until } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * import { type CrashingStore, crashingStore } from "@keel/testing/workflow";
 * import { createMemoryStore, startWorkflowEngine, step, workflow } from "@keel/workflow";
 * const ran: string[] = [];
 * const w = workflow("two", function* () {
 *   yield* step("one", function* () { ran.push("one"); });
 *   yield* step("two", function* () { ran.push("two"); });
 * });
 * const store = createMemoryStore();
 * const dying: CrashingStore = crashingStore(store, "step:two#1");
 * await run(function* () {
 *   yield* scoped(function* () {
 *     const a = yield* startWorkflowEngine({ store: dying.store, workflows: [w], owner: "a", leaseMs: 30_000 });
 *     yield* a.start(w, null, { id: "x" });
 *     yield* until(dying.whenCrashed); // "a" died as it journaled two#1
 *   });
 *   yield* sleep(30_000); // its lease ends
 *   const b = yield* startWorkflowEngine({ store, workflows: [w], owner: "b" });
 *   yield* b.result("x");
 * }, { clock: createVirtualClock() });
 * console.log(dying.crashedAt(), ran); // step:two#1 [ 'one', 'two', 'two' ]
 * ```
 */
export interface CrashingStore {
  /** The store to give the engine that is to "die". */
  readonly store: WorkflowStore;
  /** The key whose write killed the "process" (`step:charge#1`), once it has; else null. */
  crashedAt(): string | null;
  /** Resolves with that key when the "process" dies. */
  readonly whenCrashed: Promise<string>;
}

/**
 * Wraps `store` so that the first append of an entry matching `at` (a journal key such as
 * `step:charge#1`, or a predicate) "kills the process" there (see the module's comment).
 *
 * @example
 * ```ts
 * import { crashingStore } from "@keel/testing/workflow";
 * import { createMemoryStore } from "@keel/workflow";
 * const shared = createMemoryStore();
 * const dying = crashingStore(shared, "step:charge#1");
 * console.log(dying.crashedAt()); // null (until an engine on dying.store journals charge#1)
 * ```
 */
export function crashingStore(
  store: WorkflowStore,
  at: string | ((entry: JournalEntry) => boolean),
): CrashingStore {
  if (typeof store?.append !== "function")
    throw new TypeError("crashingStore(store): expected a workflow store");
  if (typeof at !== "string" && typeof at !== "function")
    throw new TypeError("crashingStore(store, at): expected a journal key (step:charge#1) or a predicate");
  let crashed: string | null = null;
  let died: (key: string) => void = () => {};
  const whenCrashed = new Promise<string>((resolve) => {
    died = resolve;
  });
  const matches = (e: JournalEntry) => (typeof at === "string" ? e.key === at : at(e));
  const dead = (): never => {
    throw new Error("simulated crash: this process is dead");
  };
  return {
    crashedAt: () => crashed,
    whenCrashed,
    store: {
      ...store,
      description: `${store.description} (crashing at ${typeof at === "string" ? at : "a predicate"})`,
      init: () => store.init(),
      close: async () => {},
      claim: async (...args) => (crashed === null ? store.claim(...args) : []),
      renew: async (...args) => (crashed === null ? store.renew(...args) : false),
      async append(id, lease, entries) {
        if (crashed !== null) dead();
        const hit = entries.find(matches);
        if (hit) {
          crashed = hit.key;
          died(hit.key);
          dead();
        }
        return store.append(id, lease, entries);
      },
      park: async (...args) => (crashed === null ? store.park(...args) : dead()),
      finish: async (...args) => (crashed === null ? store.finish(...args) : dead()),
      release: async (...args) => (crashed === null ? store.release(...args) : dead()),
    },
  };
}

/** Test support: a store that "dies" at a chosen journal entry, as a process killed there would. */
import type { JournalEntry, WorkflowStore } from "../src/index.js";

export interface CrashingStore {
  readonly store: WorkflowStore;
  /** The key whose write killed the "process", once it has. */
  readonly crashedAt: () => string | null;
}

/**
 * Wraps `store`: the first append of an entry matching `at` is not written, and from then on every
 * write of this "process" fails and it claims nothing, as if it had been killed at that point.
 */
export function crashAt(store: WorkflowStore, at: string | ((e: JournalEntry) => boolean)): CrashingStore {
  let crashed: string | null = null;
  const matches = (e: JournalEntry) => (typeof at === "string" ? e.key === at : at(e));
  const dead = () => {
    throw new Error("simulated crash: this process is dead");
  };
  return {
    crashedAt: () => crashed,
    store: {
      ...store,
      async claim(...args) {
        return crashed === null ? store.claim(...args) : [];
      },
      async append(id, lease, entries) {
        if (crashed !== null) dead();
        const hit = entries.find(matches);
        if (hit) {
          crashed = hit.key;
          dead();
        }
        return store.append(id, lease, entries);
      },
      async renew(...args) {
        return crashed === null ? store.renew(...args) : false;
      },
      async park(...args) {
        return crashed === null ? store.park(...args) : dead();
      },
      async finish(...args) {
        return crashed === null ? store.finish(...args) : dead();
      },
      async release(...args) {
        return crashed === null ? store.release(...args) : dead();
      },
    },
  };
}

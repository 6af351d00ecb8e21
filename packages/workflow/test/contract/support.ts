/**
 * What the contract suite's parts share: a fresh store per test, and small makers of the values the
 * store is given. Every instant is given explicitly (stores never read the host's clock).
 * @module
 */
import type { JournalEntry, Lease, NewExecution, WorkflowStore } from "@keel/workflow";
import { afterEach, beforeEach, expect } from "vitest";

/** A store to test, and how to drop what it made. */
export interface StoreUnderTest {
  readonly store: WorkflowStore;
  cleanup(): Promise<void>;
}

/** Makes an empty, initialised store; called once per test. */
export type MakeStore = () => Promise<StoreUnderTest>;

/** A fresh store for each test of the enclosing `describe`: call the getter inside a test. */
export function useStore(makeStore: MakeStore): () => WorkflowStore {
  let current: StoreUnderTest | null = null;
  beforeEach(async () => {
    current = await makeStore();
  });
  afterEach(async () => {
    const done = current;
    current = null;
    await done?.cleanup();
  });
  return () => {
    if (current === null) throw new Error("useStore: the store is read outside a test");
    return current.store;
  };
}

/** A new execution of the workflow `orders` (version 1, input `{ id }`, no deadline). */
export const exec = (id: string, nowMs = 0, more: Partial<NewExecution> = {}): NewExecution => ({
  id,
  workflow: "orders",
  version: 1,
  input: { id },
  deadlineAt: null,
  nowMs,
  ...more,
});

/** A step's journal entry (ok, its key as value). */
export const entry = (key: string, more: Partial<JournalEntry> = {}): JournalEntry => ({
  key,
  kind: "step",
  ok: true,
  value: key,
  error: null,
  attempts: 1,
  startedAt: 1,
  endedAt: 2,
  ...more,
});

/**
 * Creates `id` at `nowMs` and claims it for `owner` (it must be the only runnable execution, or
 * the oldest due): its lease.
 */
export async function createClaimed(
  store: WorkflowStore,
  id: string,
  owner = "worker-a",
  nowMs = 0,
  leaseMs = 1_000,
): Promise<Lease> {
  await store.create(exec(id, nowMs));
  return claimOne(store, id, owner, nowMs, leaseMs);
}

/** Claims for `owner` and expects `id` among the claimed: its lease. */
export async function claimOne(
  store: WorkflowStore,
  id: string,
  owner = "worker-a",
  nowMs = 0,
  leaseMs = 1_000,
): Promise<Lease> {
  const claimed = await store.claim(owner, nowMs, leaseMs, 100);
  const mine = claimed.find((c) => c.record.id === id);
  expect(mine, `claim by ${owner} at ${nowMs} takes ${id}`).toBeDefined();
  return { owner, generation: mine!.record.generation };
}

/** What `promise` rejects with; fails the test if it resolves. */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(value)}`);
    },
    (e: unknown) => e,
  );
}

/** The claimed ids of `store` runnable at `nowMs`, for a throwaway owner (what another process sees). */
export async function runnableIds(store: WorkflowStore, nowMs: number): Promise<string[]> {
  return (await store.claim("probe", nowMs, 1, 100)).map((c) => c.record.id);
}

/**
 * The engines the contract suite runs against. Each gives a queue inside a run, and a harness whose
 * clock drives it: the memory engine on the virtual clock; the BullMQ engine (when it lands) on the
 * real clock against the Redis at 127.0.0.1:6379.
 */
import type { Operation } from "@keel/core";
import { createHarness, type Harness } from "@keel/testing";
import { createMemoryQueue, type Queue } from "@keel/worker";

export interface EngineCase {
  readonly name: string;
  /** Why the suite is skipped for this engine (null: it runs). */
  readonly skip: string | null;
  harness(): Harness;
  open<T>(name: string, options?: { capacity?: number }): Operation<Queue<T>>;
}

export const memoryEngine: EngineCase = {
  name: "memory",
  skip: null,
  harness: () => createHarness(),
  open: <T>(name: string, options: { capacity?: number } = {}) => createMemoryQueue<T>({ name, ...options }),
};

export const engines: readonly EngineCase[] = [memoryEngine];

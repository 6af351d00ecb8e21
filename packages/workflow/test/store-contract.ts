/**
 * The store contract suite: every rule of `src/store/store.ts`, run against each store
 * (`store-memory.test.ts`, `store-postgres.test.ts`, `store-sqlite.test.ts`). A store passes when
 * it passes all of it; a rule added to store.ts gets its test here.
 * @module
 */
import { describe } from "vitest";
import { describeCreateAndClaim } from "./contract/create-claim.js";
import { describeFencingAndJournal } from "./contract/fencing-journal.js";
import { describeFinishListJson } from "./contract/finish-list-json.js";
import { describeParkSignalCancel } from "./contract/park-signal-cancel.js";
import type { MakeStore } from "./contract/support.js";

export type { MakeStore, StoreUnderTest } from "./contract/support.js";

/**
 * Declares the contract's tests for the store `makeStore` makes: one fresh, initialised store per
 * test, dropped by its `cleanup` after it.
 */
export function describeStoreContract(name: string, makeStore: MakeStore): void {
  describe(`store contract: ${name}`, () => {
    describeCreateAndClaim(makeStore);
    describeFencingAndJournal(makeStore);
    describeParkSignalCancel(makeStore);
    describeFinishListJson(makeStore);
  });
}

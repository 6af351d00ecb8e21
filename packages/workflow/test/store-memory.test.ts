/**
 * The in-memory store against the store contract.
 */
import { createMemoryStore } from "@keel/workflow";
import { describeStoreContract } from "./store-contract.js";

describeStoreContract("memory", async () => ({ store: createMemoryStore(), cleanup: async () => {} }));

/**
 * `@keel/testing`: the virtual clock, a harness with the leak check, for Keel's tests and users' too.
 * @module
 */
export type { Harness } from "./harness.js";
export { createHarness } from "./harness.js";
export type { VirtualClock } from "./virtual-clock.js";
export { createVirtualClock } from "./virtual-clock.js";

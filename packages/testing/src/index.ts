/**
 * `@keel/testing`: the virtual clock, a harness with the leak check, for Keel's tests and users' too.
 * @module @keel/testing
 */
export type { ConnectionRecord, RequestRecord } from "./fault-server/records.js";
export type {
  Behaviour,
  CloseBehaviour,
  DripBehaviour,
  HangBehaviour,
  HeaderValue,
  ResetBehaviour,
  RespondBehaviour,
  ResponseHead,
  RouteScript,
} from "./fault-server/script.js";
export type { FaultServer, FaultServerOptions } from "./fault-server/server.js";
export { createFaultServer } from "./fault-server/server.js";
export type { Harness } from "./harness.js";
export { createHarness } from "./harness.js";
export type { VirtualClock } from "./virtual-clock.js";
export { createVirtualClock } from "./virtual-clock.js";

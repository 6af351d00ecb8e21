/**
 * `@keel/core/effection`: Keel and effection 4 in one program, in both directions.
 *
 * `fromEffection(op)` runs an effection operation from Keel code; `toEffection(op)` runs a Keel
 * operation from effection code. Values and errors cross unchanged; cancellation crosses as each side
 * expects it (a halt, `iterator.return()`, for effection; a thrown `Cancelled` for Keel), and each
 * side waits for the other's teardown. Requires the optional peer dependency `effection` (^4.1).
 * @module @keel/core/effection
 */
export { fromEffection } from "./from-effection.js";
export { toEffection } from "./to-effection.js";

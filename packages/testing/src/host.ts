/**
 * The host's scheduling functions, as they were when `@keel/testing` loaded.
 *
 * A test that installs fake timers (`vi.useFakeTimers()`, sinon) replaces the globals; the virtual
 * clock's autojump, the harness's drain and the fault server's ordering must still run on the real
 * event loop, or they would wait for fake time that nobody advances.
 * @module
 */

/** `setImmediate` of the host, kept from module load. */
export const hostSetImmediate: typeof setImmediate = globalThis.setImmediate;

/** Resolves after one turn of the host's event loop (every queued promise callback has run). */
export function nextHostTurn(): Promise<void> {
  return new Promise<void>((resolve) => hostSetImmediate(resolve));
}

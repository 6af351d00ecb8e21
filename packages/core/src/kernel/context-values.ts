/**
 * How contexts are stored, apart from `context.ts` (which reads the running task): the task, its
 * frames and the run's root name this type, and `context.ts` builds on them.
 * @module
 */

/** Contexts as stored on a scope frame: a prototype chain keyed by each context's symbol. */
export type ContextValues = Record<symbol, unknown>;

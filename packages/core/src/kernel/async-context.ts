/**
 * The host's async context (Node's `AsyncLocalStorage`), carried from where a task tree starts to
 * every step of its tasks.
 *
 * Why the kernel needs it: every task resumes from one process-wide run queue, whose drain starts in
 * the async context of whoever queued first. Without re-entering each task's own context, two runs
 * started in different `AsyncLocalStorage` contexts read each other's stores.
 *
 * How: `run()`, `main()` and `scope.spawn()` capture the context in force at the call as an
 * `AsyncResource` (it copies every storage's store at construction); the drain enters it around a
 * batch of steps with the same context, so a run's steps pay a pointer compare each, and one
 * `runInAsyncScope` (~15 ns) per batch.
 *
 * Where there is no `node:async_hooks` (a browser, or Node before 20.16, which lacks
 * `process.getBuiltinModule`), there is no async context to carry: the capture is one shared object
 * that calls straight through. The module is read that way, not imported, so `@keel/core` still
 * loads there.
 * @module
 */

/** An async context a task's steps are run in: what `AsyncResource` provides. */
export interface AsyncContext {
  runInAsyncScope<A, R>(fn: (this: null, arg: A) => R, thisArg: null, arg: A): R;
}

type AsyncResourceClass = new (type: string) => AsyncContext;

/** The part of an `AsyncLocalStorage` the kernel uses. */
export interface HostStorage<T> {
  getStore(): T | undefined;
  run<R>(store: T, fn: () => R): R;
}

type AsyncLocalStorageClass = new () => HostStorage<unknown>;

interface AsyncHooks {
  AsyncResource?: AsyncResourceClass;
  AsyncLocalStorage?: AsyncLocalStorageClass;
}

function hostAsyncHooks(): AsyncHooks | undefined {
  const host = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process;
  return host?.getBuiltinModule?.("node:async_hooks") as AsyncHooks | undefined;
}

const hooks = hostAsyncHooks();
const AsyncResource = hooks?.AsyncResource ?? null;

/**
 * A new `AsyncLocalStorage`, or null on a host without one. Node enables a storage (and the async
 * hooks every promise then pays for, before Node 24) on its first `run`, not here.
 */
export function createHostStorage<T>(): HostStorage<T> | null {
  const Storage = hooks?.AsyncLocalStorage;
  return Storage && AsyncResource ? (new Storage() as HostStorage<T>) : null;
}

/** The context of a host without async context: runs `fn` in whatever context is current. */
export const NO_ASYNC_CONTEXT: AsyncContext = {
  runInAsyncScope(fn, thisArg, arg) {
    return fn.call(thisArg, arg);
  },
};

/** The async context in force here, to run a task's steps in later. */
export function captureAsyncContext(): AsyncContext {
  return AsyncResource ? new AsyncResource("keel.task") : NO_ASYNC_CONTEXT;
}

/**
 * The waits a workflow's body may make (rule W5): a step's outcome, a durable sleep, an event, a
 * hold while a replay settles. The body's wait guard lets these through and refuses every other.
 * @module
 */

type Outcome<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown };

/** What the wait does when a task enters it: start, and return its teardown (called once). */
export type Enter<T> = (resolve: (outcome: Outcome<T>) => void) => (() => void) | undefined;

/**
 * A suspension of the body, and its own operation (`yield* wait`). The runtime calls `enter` once;
 * the teardown it returns runs once when the task leaves, resumed or interrupted (or evicted).
 */
export class DurableWait<T> {
  readonly kind = "suspend" as const;
  readonly interruptible = "normal" as const;
  constructor(
    readonly description: string,
    private readonly start: Enter<T>,
  ) {}
  enter(resolve: (outcome: Outcome<T>) => void): (() => void) | undefined {
    return this.start(resolve);
  }
  *[Symbol.iterator](): Generator<unknown, T, unknown> {
    return (yield this) as T;
  }
}

/** True for a wait the body may make. */
export function isDurableWait(wait: unknown): boolean {
  return wait instanceof DurableWait;
}

/**
 * What `task.cancel()` returns: a real promise (`then`, `catch`, `finally`, `instanceof Promise`)
 * that fulfills once the task has settled, and an operation (`yield* task.cancel()`) that waits for
 * the same. The guide promises a promise (docs/guide/task-tree.md); a bare thenable had no `catch`.
 *
 * Why not `extends Promise`: a subclass must build its promise in the constructor, and most cancels
 * are never awaited (a scope cancelling its children, `task.cancel()` in a `finally`). Here the
 * promise is made on the first `then`/`catch`/`finally` only; the object itself is one small
 * instance whose prototype chain goes through `Promise.prototype`, so `instanceof Promise` holds.
 * (`Promise.prototype.then.call(f)`, which reads a native promise's internal slot, does not work on
 * it; `await`, `Promise.resolve` and every library that calls `then` do.)
 * @module
 */
import type { Operation, Suspension } from "./operation.js";

/** The task as this file needs it (task.ts imports this file, so it cannot import task.ts). */
interface Settling {
  readonly id: number;
  readonly name: string;
  /** Calls `cb` once the task has settled (at once if it has); returns the unsubscribe. */
  onSettled(cb: () => void): () => void;
}

/** @internal The settlement of a task as a lazy promise and an operation. */
export class SettledPromise implements Promise<void>, Operation<void> {
  declare readonly [Symbol.toStringTag]: string;
  private promise: Promise<void> | null = null;
  constructor(private readonly task: Settling) {}

  private settled(): Promise<void> {
    const task = this.task;
    this.promise ??= new Promise<void>((resolve) => task.onSettled(() => resolve()));
    return this.promise;
  }

  // biome-ignore lint/suspicious/noThenProperty: a real promise, by design.
  then<R1 = void, R2 = never>(
    onfulfilled?: ((value: void) => R1 | PromiseLike<R1>) | null,
    onrejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    return this.settled().then(onfulfilled, onrejected);
  }

  catch<R = never>(onrejected?: ((reason: unknown) => R | PromiseLike<R>) | null): Promise<void | R> {
    return this.settled().catch(onrejected);
  }

  finally(onfinally?: (() => void) | null): Promise<void> {
    return this.settled().finally(onfinally);
  }

  *[Symbol.iterator](): Iterator<unknown, void, unknown> {
    const task = this.task;
    yield {
      kind: "suspend",
      description: `cancel ${task.name}#${task.id}`,
      interruptible: "normal",
      enter: (resolve) => task.onSettled(() => resolve({ ok: true, value: undefined })),
    } satisfies Suspension<void>;
  }
}
Object.setPrototypeOf(SettledPromise.prototype, Promise.prototype);

/**
 * Operations for the worker's hot paths (every take, every outcome, every add), made without a
 * generator function per call: a literal `{ *[Symbol.iterator]() {…} }` makes one, with its own
 * prototype, each time (core's `kernel/bound-op.ts` measured ~400 ns against ~15 ns). Each run
 * calls the body afresh, so the operations stay re-runnable, as the literals were.
 * @module
 */
import type { Operation } from "@keel/core";

/** `body(self, a, b)` as an operation. */
export class Bound<S, A, B, R> implements Operation<R> {
  constructor(
    private readonly body: (self: S, a: A, b: B) => Iterator<unknown, R, unknown>,
    private readonly self: S,
    private readonly a: A,
    private readonly b: B,
  ) {}
  [Symbol.iterator](): Iterator<unknown, R, unknown> {
    return this.body(this.self, this.a, this.b);
  }
}

/** `fn(self, a)` as an operation that does its work when run and never suspends. */
export class Sync<S, A, R> implements Operation<R> {
  constructor(
    private readonly fn: (self: S, a: A) => R,
    private readonly self: S,
    private readonly a: A,
  ) {}
  [Symbol.iterator](): Iterator<unknown, R, unknown> {
    return new Done(this.fn(this.self, this.a));
  }
}

/** An iterator that has finished with `value`: what `yield*` over a `Sync` sees. */
class Done<R> implements Iterator<unknown, R, unknown> {
  constructor(private readonly value: R) {}
  next(): IteratorResult<unknown, R> {
    return { done: true, value: this.value };
  }
}

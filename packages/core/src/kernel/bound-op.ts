/**
 * Operations made from a module-level generator function and the arguments to run it with.
 *
 * Why not `return { *[Symbol.iterator]() { … } }`: that literal makes a new generator function on
 * every call, and V8 gives each generator function its own prototype object. Measured on Node 20:
 * about 400 ns per call for the literal, about 15 ns for an instance of these classes. `sleep`,
 * `timeout`, `scoped`, `all`, `retry` and `semaphore.use` are called on every step of a workflow.
 *
 * Each run calls the body afresh, so the operation stays re-runnable, as the literal was.
 *
 * Each class has the shared `then` of `not-a-promise.ts` on its prototype (no field per instance):
 * `await sleep(200)` rejects with `KEEL_OPERATION_AWAITED`, naming the operation by its body's
 * name (see {@link nameBody}).
 * @module
 */
import { type NotAPromise, notAPromiseClass, OP_LABEL } from "./not-a-promise.js";
import type { Operation } from "./operation.js";
import { shapes } from "./shapes.js";

/** Names the operation `body` runs, for the error of an awaited one (`sleep`, `timeout`); once, at load. */
export function nameBody<F extends object>(body: F, name: string): F {
  Object.defineProperty(body, OP_LABEL, { value: name });
  return body;
}

/** `sleep(200)`, `timeout(…)`: the body's name, with the first argument when it is a number. */
function labelOf(this: { body: { name: string; [OP_LABEL]?: string }; a: unknown }): string {
  const name = this.body[OP_LABEL] ?? this.body.name;
  return typeof this.a === "number" ? `${name}(${this.a})` : `${name}(…)`;
}

/** Puts the shared `then` and the label getter on a bound operation class's prototype. */
function boundOpClass(cls: { prototype: object }): void {
  notAPromiseClass(cls.prototype);
  Object.defineProperty(cls.prototype, OP_LABEL, { get: labelOf });
}

type Body<T> = Iterator<unknown, T, unknown>;

/** `body(a)` as an operation. */
export class BoundOp1<A, T> implements Operation<T>, NotAPromise {
  // biome-ignore lint/suspicious/noThenProperty: a `then` that throws: awaiting an operation is a mistake.
  declare readonly then: NotAPromise["then"];
  constructor(
    private readonly body: (a: A) => Body<T>,
    private readonly a: A,
  ) {
    shapes.bound1 = this;
  }
  [Symbol.iterator](): Body<T> {
    return this.body(this.a);
  }
}
boundOpClass(BoundOp1);

/** `body(a, b)` as an operation. */
export class BoundOp2<A, B, T> implements Operation<T>, NotAPromise {
  // biome-ignore lint/suspicious/noThenProperty: a `then` that throws: awaiting an operation is a mistake.
  declare readonly then: NotAPromise["then"];
  constructor(
    private readonly body: (a: A, b: B) => Body<T>,
    private readonly a: A,
    private readonly b: B,
  ) {
    shapes.bound2 = this;
  }
  [Symbol.iterator](): Body<T> {
    return this.body(this.a, this.b);
  }
}
boundOpClass(BoundOp2);

/** `body(a, b, c)` as an operation. */
export class BoundOp3<A, B, C, T> implements Operation<T>, NotAPromise {
  // biome-ignore lint/suspicious/noThenProperty: a `then` that throws: awaiting an operation is a mistake.
  declare readonly then: NotAPromise["then"];
  constructor(
    private readonly body: (a: A, b: B, c: C) => Body<T>,
    private readonly a: A,
    private readonly b: B,
    private readonly c: C,
  ) {
    shapes.bound3 = this;
  }
  [Symbol.iterator](): Body<T> {
    return this.body(this.a, this.b, this.c);
  }
}
boundOpClass(BoundOp3);

/** `body(a, b, c, d)` as an operation. */
export class BoundOp4<A, B, C, D, T> implements Operation<T>, NotAPromise {
  // biome-ignore lint/suspicious/noThenProperty: a `then` that throws: awaiting an operation is a mistake.
  declare readonly then: NotAPromise["then"];
  constructor(
    private readonly body: (a: A, b: B, c: C, d: D) => Body<T>,
    private readonly a: A,
    private readonly b: B,
    private readonly c: C,
    private readonly d: D,
  ) {
    shapes.bound4 = this;
  }
  [Symbol.iterator](): Body<T> {
    return this.body(this.a, this.b, this.c, this.d);
  }
}
boundOpClass(BoundOp4);

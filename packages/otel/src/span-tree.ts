/**
 * The spans of live tasks: each task's own span and the stack of scope spans open in it.
 *
 * Invariants: a task's `stack` holds its open timeout, retry, attempt and job spans, innermost
 * last; what the task starts next (a child task, an HTTP request, a scope) is parented by the
 * innermost, else by the task's own span, else by what its parent would parent. Ending a scope
 * ends everything opened inside it that is still open; a task's settle ends all of its own.
 * @module
 */
import { type Context, context, type Span, SpanKind, type Tracer, trace } from "@opentelemetry/api";
import { fail } from "./common.js";

export type Attributes = Record<string, string | number | boolean>;

export interface Scope {
  readonly kind: "timeout" | "retry" | "attempt" | "job";
  readonly span: Span;
  readonly ctx: Context;
  /** Found again by: the label (retry, attempt), `queue/id` (job), the scope id (timeout). */
  readonly key: string;
  /** The span's name (an attempt's is also its own timeout's label). */
  readonly name: string;
  /** A retry's budget timeout label, which merges into its span. */
  readonly budgetLabel: string | null;
  /** The id of the timeout scope merged into this span, if any. */
  timeoutId: number | null;
}

interface TaskNode {
  /** The task's own span, or null when it gets none (anonymous). */
  readonly span: Span | null;
  /** The context the task's own span (or, without one, its children) hang from. */
  readonly ctx: Context;
  readonly stack: Scope[];
}

export class SpanTree {
  private readonly tasks = new Map<number, TaskNode>();

  constructor(private readonly tracer: Tracer) {}

  /** A task started: with a span named `name`, or none (`name` null), under `parentId`'s innermost. */
  start(taskId: number, parentId: number | null, name: string | null, attributes: Attributes): void {
    // A root's start is published inside `run()`'s call: `context.active()` is the caller's.
    const parentCtx = parentId === null ? context.active() : this.contextFor(parentId);
    if (name === null) {
      this.tasks.set(taskId, { span: null, ctx: parentCtx, stack: [] });
      return;
    }
    const span = this.tracer.startSpan(name, { attributes }, parentCtx);
    this.tasks.set(taskId, { span, ctx: trace.setSpan(parentCtx, span), stack: [] });
  }

  /** A task settled: its scope spans end; its own span (if any) is returned to be finished. */
  settle(taskId: number): Span | null {
    const node = this.tasks.get(taskId);
    if (!node) return null;
    this.tasks.delete(taskId);
    for (let i = node.stack.length - 1; i >= 0; i--) node.stack[i]!.span.end();
    return node.span;
  }

  /**
   * Takes the task's open scope of `kind` off its stack, open (the scopes inside it end), so that
   * its task's settle does not end it: a job span whose outcome comes after its delivery's task.
   */
  detach(taskId: number, kind: Scope["kind"]): Scope | undefined {
    const stack = this.tasks.get(taskId)?.stack;
    const i = stack?.findIndex((s) => s.kind === kind) ?? -1;
    if (!stack || i < 0) return undefined;
    const scope = stack[i]!;
    for (const inner of stack.splice(i).slice(1).reverse()) inner.span.end();
    return scope;
  }

  /** The task's own span, if it has one. */
  taskSpan(taskId: number): Span | null {
    return this.tasks.get(taskId)?.span ?? null;
  }

  /** What a task's next child (or request, or scope) is parented by. */
  contextFor(taskId: number): Context {
    const node = this.tasks.get(taskId);
    if (!node) return context.active();
    return node.stack.length > 0 ? node.stack[node.stack.length - 1]!.ctx : node.ctx;
  }

  /** The task's innermost open scope. */
  top(taskId: number): Scope | undefined {
    const stack = this.tasks.get(taskId)?.stack;
    return stack?.[stack.length - 1];
  }

  open(
    taskId: number,
    kind: Scope["kind"],
    name: string,
    key: string,
    attributes: Attributes,
    options: { spanKind?: SpanKind; budgetLabel?: string } = {},
  ): void {
    const node = this.tasks.get(taskId);
    if (!node) return;
    const parent = this.contextFor(taskId);
    const kindOfSpan = options.spanKind ?? SpanKind.INTERNAL;
    const span = this.tracer.startSpan(name, { kind: kindOfSpan, attributes }, parent);
    node.stack.push({
      kind,
      span,
      ctx: trace.setSpan(parent, span),
      key,
      name,
      budgetLabel: options.budgetLabel ?? null,
      timeoutId: null,
    });
  }

  /** The innermost open scope of `kind` (with `key`, unless null). */
  find(taskId: number, kind: Scope["kind"], key: string | null): Scope | undefined {
    const stack = this.tasks.get(taskId)?.stack ?? [];
    for (let i = stack.length - 1; i >= 0; i--)
      if (stack[i]!.kind === kind && (key === null || stack[i]!.key === key)) return stack[i];
    return undefined;
  }

  /** The span a timeout scope reports on: its own, or the retry's or attempt's it merged into. */
  timeoutScope(taskId: number, scopeId: number): Scope | undefined {
    const stack = this.tasks.get(taskId)?.stack ?? [];
    for (let i = stack.length - 1; i >= 0; i--) {
      const s = stack[i]!;
      if (s.timeoutId === scopeId || (s.kind === "timeout" && s.key === String(scopeId))) return s;
    }
    return undefined;
  }

  /** Ends `scope` and anything opened inside it still open, failed when `error` is given. */
  end(taskId: number, scope: Scope | undefined, error: unknown): void {
    const stack = this.tasks.get(taskId)?.stack;
    if (!stack || !scope || !stack.includes(scope)) return;
    while (stack.length > 0) {
      const top = stack.pop()!;
      if (top === scope && error !== undefined) fail(top.span, error);
      top.span.end();
      if (top === scope) return;
    }
  }

  /** Adds an event to the task's innermost span. */
  eventOn(taskId: number, name: string, attributes: Attributes): void {
    trace.getSpan(this.contextFor(taskId))?.addEvent(name, attributes);
  }
}

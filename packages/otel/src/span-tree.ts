/**
 * The spans of live tasks: each task's own span and the stack of scope spans open in it.
 *
 * Invariants: a task's `stack` holds its open timeout, retry, attempt and job spans, innermost
 * last; what the task starts next (a child task, an HTTP request, a scope) is parented by the
 * innermost, else by the task's own span, else by what its parent would parent. Ending a scope
 * ends everything opened inside it that is still open; a task's settle ends all of its own.
 *
 * No span stays open for the life of the process (a backend keeps a trace open until its root
 * ends, and one trace over a deployment's jobs is unreadable): a long-lived task (`main`'s root, a
 * resource) gets no span, nor do the tasks a resource runs itself (a worker's slots, a lock
 * extender: they live as long as it). What those start is work, and begins a trace of its own: its
 * span is pending until something needs it, so that a job's delivery can take the job's context
 * instead (`adopt`).
 *
 * A task may also run one piece of work on a resource's behalf with a span opened for it in a
 * trace of its own (a workflow execution's run): `host` makes its children machinery, and a
 * stand-in names the one child that is the work (the body), which gets no span of its own and
 * hangs from the scope instead. A step's task stands in for its step scope the same way.
 * @module
 */
import {
  type Context,
  context,
  type HrTime,
  type Link,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  type SpanOptions,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { fail } from "./common.js";

export type Attributes = Record<string, string | number | boolean>;

export interface Scope {
  readonly kind: "timeout" | "retry" | "attempt" | "job" | "workflow" | "step";
  readonly span: Span;
  readonly ctx: Context;
  /**
   * Found again by: the label (retry, attempt), `queue/id` (job), the scope id (timeout), the
   * execution id (workflow), the step's key (step).
   */
  readonly key: string;
  /** The span's name (an attempt's is also its own timeout's label). */
  readonly name: string;
  /** A retry's budget timeout label, which merges into its span. */
  readonly budgetLabel: string | null;
  /** The id of the timeout scope merged into this span, if any. */
  timeoutId: number | null;
}

interface TaskNode {
  /** The task's own span, or null when it gets none (anonymous, long-lived, pending). */
  span: Span | null;
  /** The context the task's own span (or, without one, its children) hang from. */
  ctx: Context;
  readonly stack: Scope[];
  /**
   * `process`: `main`'s root (no span; its children are work, as under any root); `resource`: a
   * resource's task (no span, its own tasks are machinery); `machinery`: a resource's own task (no
   * span; what it starts is work, with a trace of its own). A machinery task that `host`s work
   * becomes a `resource`: its children are machinery too, but for its stand-ins.
   */
  role: "work" | "process" | "resource" | "machinery";
  /**
   * Children to come, by task name, that get no span: the context given stands for them (a
   * workflow run's scope for its body, a step's scope for the step's task). Each is taken once.
   */
  standIns: Map<string, Context> | null;
  /** A span not started yet (work under machinery), started with its start time when first needed. */
  pending: { name: string; attributes: Attributes; startTime: number } | null;
}

/** Now as epoch milliseconds, sub-millisecond (a pending span's start time). */
const epochNow = () => performance.timeOrigin + performance.now();

/** A task's node with no span (yet). */
function spanless(ctx: Context, role: TaskNode["role"], pending: TaskNode["pending"] = null): TaskNode {
  return { span: null, ctx, stack: [], role, pending, standIns: null };
}

export class SpanTree {
  private readonly tasks = new Map<number, TaskNode>();

  constructor(private readonly tracer: Tracer) {}

  /**
   * A task started: with a span named `name`, or none (`name` null), under `parentId`'s innermost;
   * none for a long-lived one (see the module's comment).
   */
  start(
    taskId: number,
    parentId: number | null,
    name: string | null,
    attributes: Attributes,
    longLived: boolean,
  ): void {
    const parent = parentId === null ? undefined : this.tasks.get(parentId);
    const standIn = name === null ? undefined : parent?.standIns?.get(name);
    if (standIn !== undefined) {
      parent!.standIns!.delete(name!);
      this.tasks.set(taskId, spanless(standIn, "work"));
      return;
    }
    // A root's start is published inside `run()`'s call: `context.active()` is the caller's. A
    // long-lived root (`main`'s) hands that on to its children; a resource hands on nothing.
    if (longLived) {
      const [ctx, role] =
        parentId === null ? [context.active(), "process" as const] : [ROOT_CONTEXT, "resource" as const];
      this.tasks.set(taskId, spanless(ctx, role));
      return;
    }
    if (parent?.role === "resource") {
      this.tasks.set(taskId, spanless(ROOT_CONTEXT, "machinery"));
      return;
    }
    const parentCtx = parentId === null ? context.active() : this.contextFor(parentId);
    if (name === null) {
      this.tasks.set(taskId, spanless(parentCtx, "work"));
      return;
    }
    if (parent?.role === "machinery") {
      this.tasks.set(taskId, spanless(ROOT_CONTEXT, "work", { name, attributes, startTime: epochNow() }));
      return;
    }
    const span = this.tracer.startSpan(name, { attributes }, parentCtx);
    this.tasks.set(taskId, { ...spanless(trace.setSpan(parentCtx, span), "work"), span });
  }

  /**
   * The task is a job's delivery: it gets no span of its own (a pending one is dropped), the job's
   * span opened next (`open` with its `parent`) stands for it.
   */
  adopt(taskId: number): void {
    const node = this.tasks.get(taskId);
    if (node) node.pending = null;
  }

  /**
   * The task is machinery that runs a piece of work (see the module's comment): its children get
   * no span, but for its stand-ins; a span it would have had pending is dropped.
   */
  host(taskId: number): void {
    const node = this.tasks.get(taskId);
    if (node?.role !== "machinery") return;
    node.pending = null;
    node.role = "resource";
  }

  /** The next child of `parentId` named `childName` gets no span: it hangs from `ctx`. */
  standIn(parentId: number, childName: string, ctx: Context): void {
    const node = this.tasks.get(parentId);
    if (!node) return;
    node.standIns ??= new Map();
    node.standIns.set(childName, ctx);
  }

  /** Forgets a stand-in not taken (the child never started). */
  dropStandIn(parentId: number, childName: string): void {
    this.tasks.get(parentId)?.standIns?.delete(childName);
  }

  /** The task's open scopes, innermost last (read only: to mark them before its settle ends them). */
  scopes(taskId: number): readonly Scope[] {
    return this.tasks.get(taskId)?.stack ?? [];
  }

  /**
   * A span of no duration now, under what the task's next child would be parented by: a fact
   * with a place in the trace, such as a step taken from the journal.
   */
  instant(taskId: number, name: string, attributes: Attributes): void {
    const span = this.tracer.startSpan(name, { attributes }, this.contextFor(taskId));
    // Ended at its own start (the SDK's span has `startTime`), read on the clock the SDK gives
    // its other spans, so it sits in order among them.
    span.end((span as { startTime?: HrTime }).startTime);
  }

  /** Starts the pending span of `node`, if it has one. */
  private materialize(node: TaskNode): void {
    const p = node.pending;
    if (!p) return;
    node.pending = null;
    const span = this.tracer.startSpan(
      p.name,
      { attributes: p.attributes, startTime: p.startTime },
      node.ctx,
    );
    node.span = span;
    node.ctx = trace.setSpan(node.ctx, span);
  }

  /** A task settled: its scope spans end; its own span (if any) is returned to be finished. */
  settle(taskId: number): Span | null {
    const node = this.tasks.get(taskId);
    if (!node) return null;
    this.tasks.delete(taskId);
    this.materialize(node);
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
    const node = this.tasks.get(taskId);
    if (!node) return null;
    this.materialize(node);
    return node.span;
  }

  /** What a task's next child (or request, or scope) is parented by. */
  contextFor(taskId: number): Context {
    const node = this.tasks.get(taskId);
    if (!node) return context.active();
    this.materialize(node);
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
    options?: { spanKind?: SpanKind; budgetLabel?: string; parent?: Context; links?: Link[] | undefined },
  ): Scope | undefined {
    const node = this.tasks.get(taskId);
    if (!node) return undefined;
    const parent = options?.parent ?? this.contextFor(taskId);
    const spanOptions: SpanOptions = { kind: options?.spanKind ?? SpanKind.INTERNAL, attributes };
    if (options?.links) spanOptions.links = options.links;
    const span = this.tracer.startSpan(name, spanOptions, parent);
    const scope: Scope = {
      kind,
      span,
      ctx: trace.setSpan(parent, span),
      key,
      name,
      budgetLabel: options?.budgetLabel ?? null,
      timeoutId: null,
    };
    node.stack.push(scope);
    return scope;
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

/**
 * The run queue: every task resumption goes through it, in FIFO order.
 *
 * Why a queue rather than resuming in place: a cancellation that becomes due in the same turn as a
 * value (a timer resolving a sleep and another cancelling the task) must be counted before the task
 * resumes (semantics §3), and deep chains of synchronous resumptions must not grow the stack.
 *
 * One queue serves every run, so the drain starts in the async context of whoever queued first: it
 * enters each step's own context (its task's runtime's, see `async-context.ts`), once per batch of
 * consecutive steps that share one.
 * @module
 */
import type { AsyncContext } from "./async-context.js";
import { hostTimers } from "./host.js";

// `Promise.prototype.then` on a settled promise, not `queueMicrotask`: in Node the latter wraps
// every call in an async resource, and a drain starts after every promise or timer resumption.
const resolved = Promise.resolve();
/** A queued step that is an object with a `run` method: saves a closure per resumption. */
export interface Runnable {
  run(): void;
  /** The async context `run` is called in: its task's. */
  readonly asyncContext: AsyncContext;
}

// Slots [head, tail) are queued; the array keeps its length between drains (an empty array's
// backing store would be freed and made again for every one-step drain), and slots outside the
// range hold `noop`, so nothing run stays reachable from here.
const queue: Array<(() => void) | Runnable> = [];
let head = 0;
let tail = 0;
let draining = false;
let scheduled = false;
/**
 * Beyond this, the array is given back after a drain (a burst of 100k must not pin 800 KB). Below
 * it, the array keeps its capacity: cancelling 10k tasks queues 10k steps in one drain, and regrowing
 * the array from empty for every such burst is garbage the collector then has to deal with.
 */
const KEEP_SLOTS = 1 << 15;

/** Runs `fn` on the current drain, or on a new one started as a microtask. */
export function enqueue(fn: (() => void) | Runnable): void {
  queue[tail++] = fn;
  if (!draining && !scheduled) {
    scheduled = true;
    resolved.then(drain);
  }
}

function drain(): void {
  scheduled = false;
  draining = true;
  try {
    while (head < tail) {
      const next = queue[head]!;
      // A bare function is the kernel's own (no user code): it runs in any context (see `runBatch`).
      if (typeof next === "function") runBatch(null);
      else next.asyncContext.runInAsyncScope(runBatch, null, next.asyncContext);
    }
    head = 0;
    tail = 0;
    if (queue.length > KEEP_SLOTS) queue.length = 0;
  } finally {
    draining = false;
  }
  if (afterDrain.length > 0) {
    const hooks = afterDrain.splice(0);
    for (const fn of hooks) fn();
  }
}

/**
 * Runs queued steps while they share `context` (entered by the caller; null: not entered, only bare
 * functions run), and returns at the first step with another context, or when the queue is empty.
 */
function runBatch(context: AsyncContext | null): void {
  do {
    const fn = queue[head]!;
    if (typeof fn !== "function" && fn.asyncContext !== context) return;
    queue[head++] = noop;
    try {
      if (typeof fn === "function") fn();
      else fn.run();
    } catch (e) {
      // Internal steps catch their own errors; reaching here is a Keel bug, surfaced loudly.
      hostTimers.queueMicrotask(() => {
        throw e;
      });
    }
    if (head > 1024 && head * 2 > tail) {
      // Slide the live slots down; the ones they leave keep `noop` (see above).
      queue.copyWithin(0, head, tail);
      queue.fill(noop, tail - head, tail);
      tail -= head;
      head = 0;
    }
  } while (head < tail);
}

const afterDrain: Array<() => void> = [];

/**
 * Runs `fn` once the current drain has emptied the queue (or on the next one). For work that most
 * often turns out unnecessary by then: a cleanup-budget timer for an unwinding that already ended.
 */
export function whenDrained(fn: () => void): void {
  afterDrain.push(fn);
  if (!draining && !scheduled) {
    scheduled = true;
    resolved.then(drain);
  }
}

function noop(): void {}

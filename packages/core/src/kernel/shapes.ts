/**
 * The newest instance of each hot kernel class, kept reachable.
 *
 * Why: V8 holds the hidden classes ("maps") that a constructor's field assignments lead to only
 * weakly, through its initial map. When a full GC finds no instance of a class alive (a batch that
 * has finished, a worker between bursts, a benchmark's `gc()` between samples), those maps die, and
 * with them every optimized function that checks for them: the next burst runs unoptimized until
 * V8 compiles it again. Measured on the bench's cancel row (10k tasks cancelled right after such a
 * GC): about 50 ms with the maps gone, about 22 ms with one instance of each class kept.
 *
 * Cost: one object per class stays reachable until the next one is made, with what it references
 * (a settled task keeps its value and its parent chain). That is bounded, and it is never a task the
 * runtime still acts on: nothing reads these fields.
 *
 * Invariant: written only by the classes' constructors; never read.
 * @module
 */
export const shapes: {
  task: object | null;
  waiting: object | null;
  cancelled: object | null;
  spawn: object | null;
  join: object | null;
  settleNow: object | null;
  delegated: object | null;
  until: object | null;
  action: object | null;
  yieldOnce: object | null;
  askForTask: object | null;
  semaphoreWait: object | null;
  semaphore: object | null;
  allWait: object | null;
  sleepWait: object | null;
  joinWait: object | null;
  childrenWait: object | null;
  parkedWait: object | null;
  useIterator: object | null;
  frameRare: object | null;
  bound1: object | null;
  bound2: object | null;
  bound3: object | null;
  bound4: object | null;
} = {
  task: null,
  waiting: null,
  cancelled: null,
  spawn: null,
  join: null,
  settleNow: null,
  delegated: null,
  until: null,
  action: null,
  yieldOnce: null,
  askForTask: null,
  semaphoreWait: null,
  semaphore: null,
  allWait: null,
  sleepWait: null,
  joinWait: null,
  childrenWait: null,
  parkedWait: null,
  useIterator: null,
  frameRare: null,
  bound1: null,
  bound2: null,
  bound3: null,
  bound4: null,
};

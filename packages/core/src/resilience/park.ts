/**
 * `park`: the suspension behind every queue wait in this layer (semaphore, channel, rate limiter).
 * @module
 */
import {
  type Outcome,
  type Suspension,
  SuspensionClass,
  suspensionClass,
  type Waiter,
} from "../kernel/operation.js";
import { shapes } from "../kernel/shapes.js";

/** A queue entry that can be woken. `wake` is set only while its task waits at the suspension. */
export interface Parked {
  wake: (() => void) | null;
}

/**
 * A suspension that completes once `isDone()` holds: at once if it already does, otherwise when the
 * queue calls `parked.wake()`. `leave(done)` runs exactly once when the task leaves, whether it was
 * woken or cancelled (`done` false), so the queue can drop or skip the entry. `description` is read
 * when the task tree is printed (`semaphore db: 3 waiting`).
 */
export function park(
  parked: Parked,
  isDone: () => boolean,
  leave: (done: boolean) => void,
  description: () => string,
): Suspension<void> {
  return new ParkedWait(parked, isDone, leave, description);
}

const WOKEN: Outcome<void> = Object.freeze({ ok: true, value: undefined });

/**
 * The suspension `park` returns. A class, not a literal with a getter: such a literal is a
 * dictionary-mode object with new method closures each time, on the runtime's hottest call sites.
 */
class ParkedWait extends SuspensionClass<void> {
  declare readonly interruptible: "normal";
  constructor(
    private readonly parked: Parked,
    private readonly isDone: () => boolean,
    private readonly leave: (done: boolean) => void,
    private readonly describe: () => string,
  ) {
    super();
    shapes.parkedWait = this;
  }
  get description(): string {
    return this.describe();
  }
  enterWith(waiter: Waiter<void>): (() => void) | undefined {
    if (this.isDone()) {
      this.leave(true);
      waiter.resolve(WOKEN);
      return undefined;
    }
    this.parked.wake = () => waiter.resolve(WOKEN);
    return () => {
      this.parked.wake = null;
      this.leave(this.isDone());
    };
  }
}
suspensionClass(ParkedWait, "normal");

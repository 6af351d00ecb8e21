/**
 * Every call to a store, bounded: a store that does not answer within `storeTimeoutMs` fails the
 * call with a `StoreTimeoutError` (no hidden hang: a paused database stops an execution, which
 * another process resumes, and makes the poller report the store down). The clock is held while
 * the call is in flight, so a virtual clock does not jump past real I/O (and so, on a virtual
 * clock, the bound cannot fire while a call hangs: a hang there shows as a held clock, named).
 * @module
 */
import type { Clock } from "@keel/core";
import { StoreTimeoutError } from "./errors.js";
import type { WorkflowStore } from "./store/store.js";

export function storeCall<T>(
  clock: Clock,
  store: WorkflowStore,
  timeoutMs: number,
  what: string,
  call: () => Promise<T>,
): Promise<T> {
  const release = clock.hold?.(`workflow store ${store.description}: ${what}`);
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const end = () => {
      settled = true;
      cancel();
      release?.();
    };
    const cancel = Number.isFinite(timeoutMs)
      ? clock.schedule(clock.now() + timeoutMs, () => {
          if (settled) return;
          end();
          reject(new StoreTimeoutError(store.description, what, timeoutMs));
        })
      : () => {};
    call().then(
      (value) => {
        if (settled) return;
        end();
        resolve(value);
      },
      (error) => {
        if (settled) return;
        end();
        reject(error);
      },
    );
  });
}

/**
 * The runtime's events on `node:diagnostics_channel`: one named channel per event family
 * (`keel:task`, `keel:http`, …; the list is `KEEL_CHANNELS` in `observe/events.ts`).
 *
 * Why a cached flag: the kernel decides on every task start and settle whether to build an event.
 * Asking eleven channels' `hasSubscribers` there would be eleven getter calls per task; one module
 * variable is one load. `diagnostics_channel` has no hook that reports a subscription, so each of
 * Keel's channel objects gets own `subscribe`/`unsubscribe`/`bindStore`/`unbindStore` methods that
 * call the real ones and recompute the flag. `dc.subscribe(name, fn)` goes through the channel
 * object too (`channel(name).subscribe(fn)`), so every way of subscribing is seen.
 *
 * Invariant: `channelsActive` is true exactly while some Keel channel has a subscriber (or a bound
 * store); nothing is built or published for the channels while it is false.
 *
 * Where there is no `node:diagnostics_channel` (a browser, or Node without
 * `process.getBuiltinModule`), there are no channels and the flag stays false.
 * @module
 */
import type { KeelEvent } from "../observe/events.js";
import { KEEL_CHANNELS } from "../observe/events.js";

interface HostChannel {
  readonly hasSubscribers: boolean;
  publish(message: unknown): void;
  subscribe(fn: (message: unknown, name: string | symbol) => void): void;
  unsubscribe(fn: (message: unknown, name: string | symbol) => void): boolean;
  bindStore?(store: unknown, transform?: unknown): void;
  unbindStore?(store: unknown): boolean;
}

type DiagnosticsChannelModule = { channel(name: string): HostChannel };

function hostDiagnosticsChannel(): DiagnosticsChannelModule | null {
  const host = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process;
  const dc = host?.getBuiltinModule?.("node:diagnostics_channel") as DiagnosticsChannelModule | undefined;
  return dc && typeof dc.channel === "function" ? dc : null;
}

/** True while any Keel channel has a subscriber: events are then worth building. */
export let channelsActive = false;

/** Family (`task`, `http`, …) to its channel; strongly held, so Node keeps the same object. */
const byFamily = new Map<string, HostChannel>();

function recompute(): void {
  let any = false;
  for (const ch of byFamily.values()) if (ch.hasSubscribers) any = true;
  channelsActive = any;
}

function watch(ch: HostChannel, method: "subscribe" | "unsubscribe" | "bindStore" | "unbindStore"): void {
  if (typeof ch[method] !== "function") return;
  Object.defineProperty(ch, method, {
    configurable: true,
    writable: true,
    value(this: HostChannel, ...args: unknown[]) {
      // Looked up on each call: Node swaps the channel's prototype (inactive <-> active) as
      // subscribers come and go, and the inactive `subscribe` calls `this.subscribe` again.
      const real = Object.getPrototypeOf(this)[method] as (...a: unknown[]) => unknown;
      try {
        return real.apply(this, args);
      } finally {
        recompute();
      }
    },
  });
}

const dc = hostDiagnosticsChannel();
if (dc) {
  for (const [family, name] of Object.entries(KEEL_CHANNELS)) {
    const ch = dc.channel(name);
    for (const m of ["subscribe", "unsubscribe", "bindStore", "unbindStore"] as const) watch(ch, m);
    byFamily.set(family, ch);
  }
  recompute();
}

/** Publishes `event` on its family's channel, if that channel has a subscriber. */
export function publishEvent(event: KeelEvent): void {
  const type = event.type;
  const ch = byFamily.get(type.slice(0, type.indexOf(":")));
  if (ch?.hasSubscribers) ch.publish(event);
}

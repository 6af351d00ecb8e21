/**
 * The workflow of `npm run demo:workflow`: a checkout with five steps and a durable sleep. Each
 * step prints what it does, with the process id, so a run shows which process ran what.
 * @module
 */
import { sleep } from "@keel/core";
import { sleepFor, step, stepInfo, workflow } from "@keel/workflow";

export interface Order {
  readonly id: string;
  readonly cents: number;
}

/** Where the demo writes each step's run (one line per run, kept across the kill). */
export type RunLog = (line: string) => void;

export function checkoutWorkflow(log: RunLog, chargeMs: number) {
  const effect = (name: string, ms: number, value: () => unknown) =>
    step(name, function* () {
      const { idempotencyKey } = yield* stepInfo();
      log(`${process.pid} ${name}`);
      console.log(`  [pid ${process.pid}] ${name.padEnd(8)} running   (idempotency key ${idempotencyKey})`);
      yield* sleep(ms);
      return value();
    });
  return workflow("checkout", function* (order: Order) {
    const reservation = yield* effect("reserve", 200, () => `rsv_${order.id}`);
    const charge = yield* effect("charge", chargeMs, () => `ch_${order.cents}`);
    console.log(`  [pid ${process.pid}] waiting 1 s (a durable sleep: it survives a restart)`);
    yield* sleepFor(1_000);
    const parcel = yield* effect("ship", 200, () => `parcel_${order.id}`);
    yield* effect("receipt", 100, () => `mailed`);
    return { reservation, charge, parcel };
  });
}

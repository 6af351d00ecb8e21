/**
 * Performing one step of a route's script on one request: answer, hang, drip, reset or close.
 *
 * Every scripted wait is a timer on the server's clock, counted from the request's arrival; every
 * write is made under a hold that lasts until the bytes have reached the client ({@link Activity}),
 * so on a virtual clock the client sees each byte exactly at its scripted instant.
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Clock } from "@keel/core";
import { afterDelivery } from "./holds.js";
import type { LiveConnection } from "./records.js";
import type { Head, Step } from "./routes.js";

/** One request being answered: where it came from, when, and how to write back. */
export interface Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly conn: LiveConnection;
  readonly clock: Clock;
  /** The clock's time when the request arrived; scripted delays count from it. */
  readonly arrivedAt: number;
}

/** Statuses whose responses carry no body, so no `content-length` either. */
const bodiless = (status: number) => status < 200 || status === 204 || status === 304;

/** Writes the status line and headers; `Date` is the clock's time unless the script set one. */
function writeHead(ex: Exchange, head: Head, extra: Record<string, string> = {}): void {
  ex.res.sendDate = false;
  ex.res.writeHead(head.status, {
    date: new Date(ex.clock.now()).toUTCString(),
    ...extra,
    ...head.headers,
  });
}

/** Resets the connection (RST) once what was written before has been delivered. */
function resetAfterDelivery(ex: Exchange, done: () => void): void {
  afterDelivery(() => {
    if (!ex.conn.socket.destroyed) ex.conn.socket.resetAndDestroy();
    done();
  });
}

function drip(ex: Exchange, step: Extract<Step, { kind: "drip" }>, headAt: number): void {
  const { activity } = ex.conn;
  writeHead(ex, step.head);
  if (step.count === 0) {
    ex.res.end(activity.busy("drip: head, empty body"));
    return;
  }
  ex.res.write("", activity.busy("drip: head"));
  // Absolute instants, so that a late timer on a real clock does not push the later chunks back.
  const chunkAt = (i: number) => headAt + i * step.everyMs;
  const send = (i: number) => {
    activity.schedule(chunkAt(i), () => {
      const done = activity.busy(`drip: chunk ${i} of ${step.count}`);
      if (i >= step.count) {
        ex.res.end(step.chunk, done);
        return;
      }
      ex.res.write(step.chunk, done);
      send(i + 1);
    });
  };
  send(1);
}

/** Does what `step` says with the request, now or after its delay; see the behaviour types. */
export function perform(step: Step, ex: Exchange): void {
  if (step.kind === "hang-before-headers") return;
  const { activity, socket } = ex.conn;
  const { res } = ex;
  const act = (at: number) => {
    switch (step.kind) {
      case "respond": {
        const done = activity.busy("responding");
        const noBody = bodiless(step.head.status);
        writeHead(ex, step.head, noBody ? {} : { "content-length": String(step.body.length) });
        if (noBody) res.end(done);
        else res.end(step.body, done);
        return;
      }
      case "hang-after-headers":
        writeHead(ex, step.head);
        res.write("", activity.busy("hang: head"));
        return;
      case "drip":
        drip(ex, step, at);
        return;
      case "reset-before-headers": {
        const done = activity.busy("reset");
        socket.resetAndDestroy();
        done();
        return;
      }
      case "reset-after-headers": {
        const done = activity.busy("reset after the head");
        writeHead(ex, step.head);
        res.write("", () => resetAfterDelivery(ex, done));
        return;
      }
      case "reset-mid-body": {
        const done = activity.busy(`reset after ${step.afterBytes} body bytes`);
        writeHead(ex, step.head);
        res.write(Buffer.alloc(step.afterBytes, "x"), () => resetAfterDelivery(ex, done));
        return;
      }
      case "close": {
        const done = activity.busy("close");
        socket.destroy();
        done();
        return;
      }
    }
  };
  if (step.delayMs > 0) {
    const at = ex.arrivedAt + step.delayMs;
    activity.schedule(at, () => act(at));
  } else {
    act(ex.clock.now());
  }
}

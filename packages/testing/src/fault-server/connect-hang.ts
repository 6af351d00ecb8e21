/**
 * A listener whose connects never complete: its accept queue is full, so the kernel drops every
 * new SYN and the client's `connect` waits (until its own timeout, or about two minutes of SYN
 * retries), as against a host that silently drops packets.
 *
 * Node's `net.Server` accepts as fast as connections arrive, so the queue can only stay full if
 * nobody accepts: a child process listens with a backlog of 1 and blocks its own event loop in a
 * synchronous read of its stdin; the parent fills the queue with two connections (Linux queues
 * backlog + 1). Writing a byte to the child's stdin unblocks it: it closes its listener (the queued
 * fillers are reset) and the parent listens on the same port, serving every later connection like
 * its own (same routes, holds and records); a connect that hung completes at its next SYN
 * retransmission (about 1 s after it started). If the parent dies, the child reads EOF (or loses
 * IPC) and exits.
 * Stopping kills it.
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import { connect, createServer, type Server, type Socket } from "node:net";
import { action, type Clock, type Operation } from "@keel/core";

// Runs in the child (CommonJS, `node -e`). Prints its port, then blocks until a byte or EOF; once
// released, hands every connection to the parent, unread (pauseOnConnect).
const CHILD = `
const net = require("node:net");
const fs = require("node:fs");
const server = net.createServer({ pauseOnConnect: true }, (socket) => process.send("connection", socket));
server.listen({ host: "127.0.0.1", port: 0, backlog: 1 }, () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + "\\n");
  const one = Buffer.alloc(1);
  let n;
  for (;;) {
    try { n = fs.readSync(0, one, 0, 1, null); break; }
    catch (e) { if (e.code !== "EAGAIN") throw e; Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5); }
  }
  if (n === 0) process.exit(0);
  // Released: give the port back, so the parent listens on it and serves every later connect itself.
  server.close();
  server.on("close", () => process.send("closed"));
  process.on("disconnect", () => process.exit(0));
});
`;

/** How many connections fill a backlog-1 queue on Linux, which accepts while it holds ≤ backlog. */
const FILLERS = 2;

/** A running connect-hang listener. */
export interface ConnectHang {
  /** `http://127.0.0.1:PORT`. */
  readonly url: string;
  /** `127.0.0.1:PORT`: the key a client's connect holds carry, declared idle while hanging. */
  readonly origin: string;
  /** Unblocks the child: queued and later connects complete and are handed over. Idempotent. */
  release(): void;
  /** Kills the child and drops the fillers; waits until the child has exited. Idempotent. */
  stop(): Operation<void>;
}

/** A clock that may accept idle declarations (the virtual clock does). */
type IdleClock = Clock & { idle?(key: string): () => void };

/**
 * Starts the child and fills its queue; once released, each connection it accepts is passed to
 * `serve` (the parent's own fillers excepted). The returned handle exists before the wait for the
 * child, so a caller cancelled during start-up still stops it: call `stop()` in a `finally` either way.
 */
export function startConnectHang(
  clock: IdleClock,
  serve: (socket: Socket) => void,
): { ready: Operation<ConnectHang>; stop(): Operation<void> } {
  const child: ChildProcess = spawn(process.execPath, ["-e", CHILD], {
    stdio: ["pipe", "pipe", "pipe", "ipc"],
    // A loader from the parent's NODE_OPTIONS (tsx, a coverage hook) would only slow the child down.
    env: { ...process.env, NODE_OPTIONS: "" },
  });
  const fillers: Socket[] = [];
  let endIdle: (() => void) | null = null;
  let released = false;
  let stopped = false;
  let exited = false;
  let spawnError: Error | null = null;
  const exit = new Promise<void>((resolve) => {
    // "close", not "exit": by then the child's stdio pipes are closed too.
    child.once("close", () => {
      exited = true;
      resolve();
    });
    // A child that could not be spawned emits "error" and no "close".
    child.once("error", (e) => {
      spawnError = e;
      if (child.pid === undefined) {
        exited = true;
        resolve();
      }
    });
  });
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  child.stdin!.on("error", () => {});
  // On release the child closes its listener and the parent takes the port over, so no connection
  // is ever handed between processes while a client waits (a gap no hold could see). Virtual time is
  // held from the release until the parent listens, so no client connects in between.
  let takeover: Server | null = null;
  let takeoverHold: (() => void) | null = null;
  let port = 0;
  const endTakeoverHold = () => {
    takeoverHold?.();
    takeoverHold = null;
  };
  child.on("message", (message: unknown, handle: unknown) => {
    if (message === "closed") {
      if (stopped) return endTakeoverHold();
      takeover = createServer((socket) => (stopped ? socket.destroy() : serve(socket)));
      takeover.on("error", () => endTakeoverHold());
      takeover.listen({ host: "127.0.0.1", port }, endTakeoverHold);
      return;
    }
    if (message !== "connection" || !handle) return;
    const socket = handle as Socket;
    if (stopped || fillers.some((f) => f.localPort === socket.remotePort)) socket.destroy();
    else serve(socket);
  });

  const release = () => {
    if (released || stopped) return;
    released = true;
    endIdle?.();
    endIdle = null;
    takeoverHold =
      (clock as Clock & { hold?(d: string): () => void }).hold?.("connect hang: taking the port over") ??
      null;
    child.stdin!.write("x");
  };

  function* stop(): Operation<void> {
    if (!stopped) {
      stopped = true;
      endIdle?.();
      endIdle = null;
      endTakeoverHold();
      takeover?.close();
      for (const s of fillers) s.destroy();
      if (!exited) child.kill("SIGKILL");
    }
    if (exited) return;
    yield* action<void>((resolve) => {
      void exit.then(() => resolve());
      return () => {};
    }, "connect hang: stopping");
  }

  function* ready(): Operation<ConnectHang> {
    port = yield* action<number>((resolve, reject) => {
      let out = "";
      const onData = (d: string) => {
        out += d;
        const line = out.indexOf("\n");
        if (line >= 0) resolve((JSON.parse(out.slice(0, line)) as { port: number }).port);
      };
      const fail = () =>
        reject(
          new Error(
            `fault server: the connect-hang child ended before listening (${spawnError?.message ?? child.exitCode ?? child.signalCode}): ${stderr}`,
          ),
        );
      child.stdout!.setEncoding("utf8").on("data", onData);
      void exit.then(fail);
      return () => {
        child.stdout!.off("data", onData);
      };
    }, "connect hang: starting the child");
    child.stdout!.resume();
    for (let i = 0; i < FILLERS; i++) {
      yield* action<void>(
        (resolve, reject) => {
          const s = connect({ host: "127.0.0.1", port });
          fillers.push(s);
          s.on("error", () => {});
          const onError = (e: Error) => reject(e);
          s.once("connect", () => resolve());
          s.once("error", onError);
          return () => s.off("error", onError);
        },
        `connect hang: filling the queue (${i + 1} of ${FILLERS})`,
      );
    }
    const origin = `127.0.0.1:${port}`;
    if (!stopped && !released) endIdle = clock.idle?.(origin) ?? null;
    return { url: `http://${origin}`, origin, release, stop };
  }

  return {
    ready: {
      *[Symbol.iterator]() {
        return yield* ready();
      },
    },
    stop,
  };
}

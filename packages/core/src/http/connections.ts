/**
 * The client's books on connections: which requests still wait for a socket, and which sockets are
 * still connecting, per origin.
 *
 * Why: undici keeps connecting when the only request that wanted a connection is aborted, and after
 * an abort mid-flight it reconnects for the aborted request before dropping it. Either way a
 * cancelled call would leave a socket behind (connecting, or opened for nothing). With these books
 * the connector refuses to open a connection no live request needs, and the last live request to
 * give up on an origin destroys the sockets still connecting to it.
 *
 * The books also keep every socket they handed to undici until it closes, and the client's end
 * destroys those still open. undici 7's Pool drops a client from its list after a connection error
 * without closing it, and that client keeps taking queued requests from the pool: it connects
 * again, and `agent.destroy()` no longer reaches its socket (undici 8 closes such a client). Keel's
 * refused and abandoned connects are connection errors, so under timeouts and cancellation this
 * happened, and sockets stayed open after the client's scope had ended (issue 11).
 * @module
 */
import type { Socket } from "node:net";
import { buildConnector } from "undici";
import { KeelError } from "../errors.js";
import type { Clock } from "../kernel/clock.js";
import { hostTimers } from "../kernel/host.js";

/** `host:port`, with the protocol's default port made explicit. */
export function originKey(hostname: string, port: string | number | undefined, protocol: string): string {
  const p = port === undefined || port === "" ? (protocol === "https:" ? 443 : 80) : port;
  return `${hostname}:${p}`;
}

export class ConnectionBook {
  /** Invariant: the count of live requests per origin from dispatch until they reach a socket. */
  private readonly waiting = new Map<string, number>();
  private readonly connecting = new Map<string, Set<Socket>>();
  /** Invariant: every socket handed to undici that has not closed yet. */
  private readonly open = new Set<Socket>();

  constructor(private readonly clock: Clock) {}

  waitStart(key: string): void {
    this.waiting.set(key, (this.waiting.get(key) ?? 0) + 1);
  }

  /** A request stopped waiting; when it gave up and was the last, nothing needs the pending connects. */
  waitEnd(key: string, gaveUp: boolean): void {
    const n = (this.waiting.get(key) ?? 1) - 1;
    if (n > 0) {
      this.waiting.set(key, n);
      return;
    }
    this.waiting.delete(key);
    if (gaveUp) this.destroyConnecting(key);
  }

  /** Destroys every socket still connecting, and every one undici still holds open (the pool is closing). */
  destroyAll(): void {
    for (const key of [...this.connecting.keys()]) this.destroyConnecting(key);
    for (const s of this.open) s.destroy();
    this.open.clear();
  }

  /**
   * undici's connector with the books kept: it holds a virtual clock while a handshake is in flight
   * (key: the origin), refuses a connection no live request waits for, and records the socket
   * until it has connected.
   */
  connector(): buildConnector.connector {
    const connect = buildConnector({});
    return (opts, callback) => {
      const key = originKey(opts.hostname, opts.port, opts.protocol);
      if (!this.waiting.get(key)) {
        callback(
          new KeelError("KEEL_CONNECT_UNNEEDED", `${key}: no live request waits for this connection`),
          null,
        );
        return;
      }
      const release = this.clock.hold?.(`http connect ${key}`, key);
      const set = this.connecting.get(key) ?? new Set<Socket>();
      this.connecting.set(key, set);
      let socket: Socket | null = null;
      socket = connect(opts, (err, connected) => {
        if (socket) set.delete(socket);
        if (set.size === 0 && this.connecting.get(key) === set) this.connecting.delete(key);
        if (release) hostTimers.setImmediate(release);
        if (err) return callback(err, null);
        const s = connected as unknown as Socket;
        this.open.add(s);
        s.once("close", () => this.open.delete(s));
        callback(null, connected);
      }) as unknown as Socket;
      if (socket) set.add(socket);
    };
  }

  private destroyConnecting(key: string): void {
    const set = this.connecting.get(key);
    if (!set) return;
    this.connecting.delete(key);
    const release = this.clock.hold?.(`http connect ${key}: closing`, key);
    for (const s of set)
      s.destroy(new KeelError("KEEL_CONNECT_UNNEEDED", `${key}: connect abandoned, no request needs it`));
    if (release) hostTimers.setImmediate(release);
  }
}

/**
 * What the fault server saw: one record per request and per connection, on the server's clock.
 * @module
 */
import type { IncomingHttpHeaders } from "node:http";
import type { Socket } from "node:net";
import type { Clock } from "@keel/core";
import { type Activity, createActivity } from "./holds.js";

/**
 * One request as the server received it.
 *
 * @example
 * ```ts
 * import type { RequestRecord } from "@keel/testing";
 * const arrivals = (rs: readonly RequestRecord[]) => rs.map((r) => `${r.method} ${r.path}@${r.arrivedAt}`);
 * console.log(arrivals([])); // []
 * ```
 */
export interface RequestRecord {
  readonly method: string;
  /** The request target as sent, query string included. */
  readonly path: string;
  /** Header names lower-cased, as node:http gives them. */
  readonly headers: Readonly<IncomingHttpHeaders>;
  /** The clock's time when the request's head had been read. */
  readonly arrivedAt: number;
  /** The {@link ConnectionRecord.id} it came on: equal ids mean a reused connection. */
  readonly connectionId: number;
  /** The route key it matched, or `null` (answered 404). */
  readonly route: string | null;
  /** Which request to its route this was, from 0 (it got that behaviour of the sequence). */
  readonly index: number;
  /** The body as UTF-8, as far as it has arrived. */
  readonly body: string;
}

/**
 * One accepted connection, server side.
 *
 * @example
 * ```ts
 * import type { ConnectionRecord } from "@keel/testing";
 * const open = (cs: readonly ConnectionRecord[]) => cs.filter((c) => c.closedAt === null).length;
 * console.log(open([])); // 0
 * ```
 */
export interface ConnectionRecord {
  /** 1, 2, 3… in the order connections were accepted. */
  readonly id: number;
  /** The clock's time when it was accepted. */
  readonly openedAt: number;
  /** The clock's time when its socket closed (either side), `null` while open. */
  readonly closedAt: number | null;
  /** Bytes the server has written to it, response heads included. */
  readonly bytesWritten: number;
}

/** A connection the server tracks: its record, socket, and the activity its timers and holds run in. */
export interface LiveConnection {
  readonly record: ConnectionRecord;
  readonly socket: Socket;
  readonly activity: Activity;
  /** Resolves once the socket has closed and the record has its `closedAt`. */
  readonly closed: Promise<void>;
}

/** The server's books: every request and connection, and the live sockets. */
export interface Recorder {
  readonly requests: RequestRecord[];
  readonly connections: ConnectionRecord[];
  /** Starts tracking a socket the server accepted. */
  accept(socket: Socket): LiveConnection;
  /** The tracked connection of `socket` (accepting it now if it was not yet). */
  connectionOf(socket: Socket): LiveConnection;
  /** Connections whose socket has not closed yet. */
  readonly live: ReadonlySet<LiveConnection>;
  /** Requests whose path (query left out) is `path`; `"METHOD /path"` also checks the method. */
  hits(path: string): number;
}

/** Creates the books of one fault server, stamping records with `clock.now()`. */
export function createRecorder(clock: Clock): Recorder {
  const requests: RequestRecord[] = [];
  const connections: ConnectionRecord[] = [];
  const bySocket = new WeakMap<Socket, LiveConnection>();
  const live = new Set<LiveConnection>();

  const accept = (socket: Socket): LiveConnection => {
    const id = connections.length + 1;
    const record = {
      id,
      openedAt: clock.now(),
      closedAt: null as number | null,
      get bytesWritten() {
        return socket.bytesWritten;
      },
    };
    const activity = createActivity(clock, `connection ${id}`);
    let markClosed!: () => void;
    const closed = new Promise<void>((resolve) => {
      markClosed = resolve;
    });
    const conn: LiveConnection = { record, socket, activity, closed };
    connections.push(record);
    bySocket.set(socket, conn);
    live.add(conn);
    // The request usually arrives in the next poll phase; bridge the gap so time cannot jump first.
    activity.busy("accepting")();
    // The client closed its side: hold until the socket is closed here, so closedAt is its instant.
    socket.once("end", () => {
      activity.busy("closing after the client's FIN");
    });
    socket.on("error", () => {});
    socket.once("close", () => {
      record.closedAt = clock.now();
      live.delete(conn);
      activity.dispose();
      markClosed();
    });
    return conn;
  };

  return {
    requests,
    connections,
    accept,
    connectionOf: (socket) => bySocket.get(socket) ?? accept(socket),
    live,
    hits(path) {
      const space = path.indexOf(" ");
      const method = space > 0 ? path.slice(0, space).toUpperCase() : null;
      const want = space > 0 ? path.slice(space + 1) : path;
      return requests.filter((r) => {
        const pathname = r.path.split("?", 1)[0];
        return pathname === want && (method === null || r.method === method);
      }).length;
    },
  };
}

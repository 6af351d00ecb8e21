/**
 * The HTTP benchmark's server, in its own process: `node:http` on 127.0.0.1, an ephemeral port, one
 * small JSON reply to every request. Prints `{"port":…}` once listening; exits on SIGTERM or when its
 * parent closes stdin.
 *
 * Usage: node src/http/server.ts (through tsx)
 * @module
 */
import { createServer } from "node:http";
import { REPLY } from "./peer.js";

const body = Buffer.from(JSON.stringify(REPLY));
const headers = { "content-type": "application/json", "content-length": String(body.length) };

const server = createServer((req, res) => {
  // Drain any request body, so the connection stays reusable.
  req.resume();
  res.writeHead(200, headers);
  res.end(body);
});
// Longer than any gap between a client's passes, so no pass pays for reconnecting.
server.keepAliveTimeout = 60_000;

server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("bench: no port");
  process.stdout.write(`${JSON.stringify({ port: address.port })}\n`);
});

const stop = () => {
  server.closeAllConnections();
  server.close();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.stdin.on("end", stop);
process.stdin.resume();

/**
 * A loopback port where nothing listens, so a connect to it fails at once with `ECONNREFUSED`.
 * @module
 */
import { createServer } from "node:net";
import { action, type Operation } from "@keel/core";

/**
 * Finds a free port by listening on port 0 and closing again. Node cannot bind a TCP port without
 * listening, so the port is not reserved afterwards; the kernel hands out ephemeral ports in
 * rotation, so another listener taking it during a test is unlikely, not impossible.
 */
export function findRefusedPort(): Operation<number> {
  return action<number>((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen({ host: "127.0.0.1", port: 0 }, () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
    return () => {
      if (probe.listening) probe.close();
    };
  }, "fault server: finding a refused port");
}

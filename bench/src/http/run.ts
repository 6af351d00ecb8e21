/**
 * The HTTP benchmark: Keel's `client.getJson` against plain `undici.request` + `JSON.parse` (an Agent
 * with the same 10 connections) and Node's global `fetch`, on a loopback `node:http` server in its own
 * process. Every pass runs in its own child process, the clients taking turns; the table shows requests per
 * second and p99 latency (medians over the passes), with ratios to plain undici, and checks Keel's
 * target: at least 0.9× plain undici's requests per second.
 *
 * Keel runs from its build: run `npm run build -w @keel/core` first (the children refuse the sources).
 *
 * Usage (from bench/): `node --import tsx src/http/run.ts [--reps=5]`
 * @module
 */
import { spawn } from "node:child_process";
import os from "node:os";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { machine, markdownTable, times } from "../resilience/machine.js";
import { benchDir, interleave, median, runChild } from "../resilience/samples.js";
import { type ClientId, CONNECTIONS, clientIds } from "./peer.js";

const childScript = fileURLToPath(new URL("./child.ts", import.meta.url));
const serverScript = fileURLToPath(new URL("./server.ts", import.meta.url));

const clientNames: Record<ClientId, string> = {
  keel: "Keel `client.getJson`",
  undici: "undici 7.30.2 `request` + `JSON.parse`",
  fetch: `global \`fetch\` (Node's undici ${process.versions.undici})`,
};

interface Mode {
  readonly id: string;
  readonly title: string;
  readonly n: number;
  readonly inFlight: number;
}

const modes: readonly Mode[] = [
  { id: "sequential", title: "sequential: 2,000 GETs one after another", n: 2000, inFlight: 1 },
  { id: "in-flight-50", title: "50 in flight: 5,000 GETs, 50 at once", n: 5000, inFlight: 50 },
];

const reps = Number(process.argv.find((a) => a.startsWith("--reps="))?.slice(7) ?? 5);
/**
 * Warm-up passes per process before the measured one. Four: Keel's client runs more JavaScript per
 * request than plain undici, and with one warm-up its second pass at 50 in flight was still being
 * optimized (one process each, rps per pass: Keel 4,581, 7,990, 10,528, 10,935, 14,150, 15,504;
 * undici 5,378, 9,759, 7,780, 11,608, 13,289, 11,504), so the row measured V8's warm-up.
 */
const WARMUP = 4;

interface Cell {
  readonly rps: readonly number[];
  readonly p99Ms: readonly number[];
  readonly medianRps: number;
  readonly medianP99Ms: number;
}

/** Starts the server process and resolves its origin once it prints its port. */
async function startServer() {
  const server = spawn(process.execPath, ["--import", "tsx", serverScript], {
    cwd: benchDir,
    // stdin stays open: the server exits when it closes, so it never outlives this process.
    stdio: ["pipe", "pipe", "inherit"],
    env: { ...process.env, NODE_OPTIONS: "" },
  });
  const line = await new Promise<string>((resolve, reject) => {
    server.once("exit", (code) => reject(new Error(`bench: the server exited with ${code}`)));
    createInterface({ input: server.stdout }).once("line", resolve);
  });
  const { port } = JSON.parse(line) as { port: number };
  return {
    origin: `http://127.0.0.1:${port}`,
    stop: () => {
      server.stdin.end();
      server.kill("SIGTERM");
    },
  };
}

/** Every client's cell for `mode`: `reps` passes each, one process per pass, taking turns. */
function measureMode(origin: string, mode: Mode): Map<ClientId, Cell> {
  const measured = interleave(
    clientIds,
    () => reps,
    (id) => runChild(childScript, [id, origin, String(mode.n), String(mode.inFlight), "1", String(WARMUP)]),
  );
  const cells = new Map<ClientId, Cell>();
  for (const id of clientIds) {
    const { samples, wallMs } = measured.get(id)!;
    const rps = samples.map((x) => x.rps!);
    const p99Ms = samples.map((x) => x.p99Ms!);
    const cell = { rps, p99Ms, medianRps: median(rps), medianP99Ms: median(p99Ms) };
    cells.set(id, cell);
    console.error(
      `  ${id.padEnd(7)} ${mode.id.padEnd(13)} ${formatRps(cell.medianRps).padStart(7)} rps  p99 ${formatMs(cell.medianP99Ms)}  (${(wallMs / 1000).toFixed(1)} s)`,
    );
  }
  return cells;
}

function formatRps(v: number): string {
  return Math.round(v).toLocaleString("en-US");
}

function formatMs(v: number): string {
  return `${v >= 10 ? v.toFixed(1) : v.toFixed(2)} ms`;
}

async function main(): Promise<void> {
  const loadAtStart = os.loadavg()[0]!;
  const started = performance.now();
  const server = await startServer();
  const results = new Map<string, Map<ClientId, Cell>>();
  try {
    console.error(
      `http bench: ${reps} passes per cell, one process each, clients taking turns; server at ${server.origin}`,
    );
    for (const mode of modes) results.set(mode.id, measureMode(server.origin, mode));
  } finally {
    server.stop();
  }

  const verdicts: string[] = [];
  const header = ["mode", ...clientIds.flatMap((c) => [`${clientNames[c]}: rps`, "p99"]), "target"];
  const table = markdownTable([
    header,
    ...modes.map((mode) => {
      const cells = results.get(mode.id)!;
      const plain = cells.get("undici")!;
      const keel = cells.get("keel")!;
      const r = keel.medianRps / plain.medianRps;
      const ok = r >= 0.9;
      verdicts.push(`${ok ? "PASS" : "MISS"}  ${mode.title}: Keel ${times(r)} plain undici's rps`);
      return [
        mode.title,
        ...clientIds.flatMap((c) => {
          const cell = cells.get(c)!;
          return [
            `${formatRps(cell.medianRps)} (${times(cell.medianRps / plain.medianRps)})`,
            `${formatMs(cell.medianP99Ms)} (${times(cell.medianP99Ms / plain.medianP99Ms)})`,
          ];
        }),
        `Keel ≥ ×0.9 rps: ${ok ? "PASS" : "MISS"}`,
      ];
    }),
  ]);
  const lines = [
    "## HTTP: Keel's client against plain undici and fetch",
    "",
    ...machine(loadAtStart),
    `- server: \`node:http\` on 127.0.0.1 in its own process, a ${"small"} JSON reply with content-length; ${reps} passes per cell, each in its own process after ${WARMUP} warm-up, the clients taking turns pass by pass; rps and p99 are medians over the passes`,
    `- Keel: \`createHttpClient({ baseUrl, connections: ${CONNECTIONS}, retry: false })\`, default timeouts, real clock, from packages/core/dist; undici: \`new Agent({ connections: ${CONNECTIONS}, pipelining: 1 })\`; fetch: Node's default global dispatcher (no cap on connections)`,
    "",
    table,
    "",
    "Passes (rps / p99):",
    "",
    ...modes.flatMap((mode) =>
      clientIds.map((c) => {
        const cell = results.get(mode.id)!.get(c)!;
        return `- ${mode.id}, ${c}: ${cell.rps.map((v, i) => `${formatRps(v)} / ${formatMs(cell.p99Ms[i]!)}`).join(", ")}`;
      }),
    ),
    "",
    ...verdicts,
    "",
    `(${((performance.now() - started) / 1000).toFixed(0)} s)`,
  ];
  console.log(lines.join("\n"));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});

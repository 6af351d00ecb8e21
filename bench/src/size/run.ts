/**
 * The size row: one program (a first attempt that hangs, cut by a 20 ms timeout and retried) built
 * for Keel, effection and effect in one run, each a minified esbuild bundle for Node, measured in
 * bytes and gzip bytes. Each bundle is then run, and must print `hello, world`, so a size is never
 * that of a program tree-shaking broke. Keel's bytes are also broken down by module (esbuild's
 * metafile), to show where they are, and `run` alone is measured as Keel's floor.
 *
 * Keel is bundled from its build, as users get it: run `npm run build -w @keel/core` first (the
 * `bench:size` script does).
 *
 * Usage (from bench/): `node --import tsx src/size/run.ts`; writes `bench/results-size.md`.
 * @module
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build, type Metafile } from "esbuild";
import { machine, markdownTable, times } from "../resilience/machine.js";
import { benchDir } from "../resilience/samples.js";

const programs = [
  { id: "keel", name: "Keel" },
  { id: "effection", name: "effection 4.1.1" },
  { id: "effect", name: "effect 4.1.0" },
] as const;

/** Keel's target for this program, minified (issue 15). */
const TARGET_BYTES = 20_000;

const kb = (bytes: number) => `${(bytes / 1000).toFixed(1)} KB`;

interface Built {
  readonly name: string;
  readonly bytes: number;
  readonly gzipBytes: number;
  readonly metafile: Metafile;
}

async function bundle(id: string, name: string): Promise<Built> {
  const entry = fileURLToPath(new URL(`./programs/${id}.ts`, import.meta.url));
  const result = await build({
    entryPoints: [entry],
    absWorkingDir: benchDir,
    bundle: true,
    minify: true,
    format: "esm",
    platform: "node",
    target: "node20",
    write: false,
    metafile: true,
    logLevel: "error",
  });
  const code = result.outputFiles[0]!.contents;
  const out = execFileSync(process.execPath, ["--input-type=module", "-"], {
    input: code,
    encoding: "utf8",
  }).trim();
  if (out !== "hello, world") throw new Error(`${name}'s bundle printed ${JSON.stringify(out)}`);
  return {
    name,
    bytes: code.byteLength,
    gzipBytes: gzipSync(code, { level: 9 }).byteLength,
    metafile: result.metafile,
  };
}

/** Keel's bytes in the bundle, per source module, largest first. */
function byModule(metafile: Metafile): [string, number][] {
  const output = Object.values(metafile.outputs)[0]!;
  return Object.entries(output.inputs)
    .map(([path, { bytesInOutput }]): [string, number] => [
      path.replace(/^.*packages\/core\/dist\//, "").replace(/\.js$/, ".ts"),
      bytesInOutput,
    ])
    .filter(([, bytes]) => bytes > 0)
    .sort((a, b) => b[1] - a[1]);
}

const load = os.loadavg()[0]!;
const built: Built[] = [];
for (const { id, name } of programs) built.push(await bundle(id, name));
const keel = built[0]!;
const floor = await bundle("keel-run", "Keel, run alone");

const table = markdownTable([
  ["program: run + timeout + retry", "minified", "gzip", "minified vs Keel"],
  ...built.map((b) => [b.name, kb(b.bytes), kb(b.gzipBytes), b === keel ? "" : times(b.bytes / keel.bytes)]),
]);
const modules = byModule(keel.metafile);
const breakdown = markdownTable([
  ["Keel module (packages/core/src)", "bytes in the bundle"],
  ...modules.map(([path, bytes]) => [path, bytes.toLocaleString("en-US")]),
]);
const verdict = `${keel.bytes <= TARGET_BYTES ? "met" : "missed"}: Keel ≤ ${kb(TARGET_BYTES)} minified (${kb(keel.bytes)})`;
const floorLine = `Keel's floor, \`run\` alone (\`programs/keel-run.ts\`): ${kb(floor.bytes)} minified, ${kb(floor.gzipBytes)} gzip.`;

const report = [
  "# Bundle size results",
  "",
  "Written by `npm run bench:size -w @keel/bench` (bench/src/size/run.ts); the programs are in",
  "`bench/src/size/programs/`. Each is bundled by esbuild (`--bundle --minify --format=esm",
  "--platform=node`), run once (it must print `hello, world`), and measured; gzip is level 9.",
  "",
  ...machine(load),
  "",
  table,
  "",
  `Target: ${verdict}.`,
  "",
  floorLine,
  "",
  "Where Keel's bytes are (esbuild metafile, bytes each module contributes to the minified output):",
  "",
  breakdown,
  "",
].join("\n");
writeFileSync(new URL("../../results-size.md", import.meta.url), report);
console.log(`${table}\n\n${verdict}\n${floorLine}\n\n${breakdown}`);

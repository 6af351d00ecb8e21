#!/usr/bin/env node
/**
 * The consumer smoke check: Keel's packages as a user gets them.
 *
 * Packs every public workspace (`npm pack`, which runs each package's clean `prepack` build),
 * installs the tarballs into a new project outside the repository (no workspace links; peers and
 * tools at the repository's own pinned versions, from npm's cache when it has them), and there:
 * checks that every file the `exports` maps and the source maps name is in the tarball, imports
 * every entry point from ESM and requires each from CommonJS (`require(esm)`), bundles every entry
 * point with esbuild and runs them with tsx under the `source` condition, bundles a run+timeout+retry program minified and runs it (so
 * `sideEffects: false` is tried), type-checks a consumer under `moduleResolution` `node16` and
 * `bundler`, runs a vitest test that uses `@keel/testing`, installs `@keel/worker` and `@keel/core`
 * with a plain `npm install` into a second project that already has bullmq 5 and ioredis (no
 * ERESOLVE; `@keel/worker/bullmq` loads there), and runs `publint --strict` on each tarball.
 *
 * Nothing is listed by hand: packages come from the root `workspaces` (private ones skipped), entry
 * points from each package's `exports`, peers from each package's `peerDependencies`. A new
 * package or subpath is covered when it lands.
 *
 * Usage: `npm run smoke:consumer` (`KEEP=1` keeps the temporary project).
 */
import { execFileSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { stripVTControlCharacters } from "node:util";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const started = performance.now();
const rootPkg = readJson(join(root, "package.json"));
const pins = { ...rootPkg.dependencies, ...rootPkg.devDependencies };
const bin = (name) => join(root, "node_modules", ".bin", name);

function readJson(file) {
  return JSON.parse(readFileSync(file, "utf8"));
}

function sh(cmd, args, cwd, what) {
  try {
    return execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    process.stderr.write(`${e.stdout ?? ""}${e.stderr ?? ""}`);
    throw new Error(`${what} failed (${cmd} ${args.join(" ")} in ${cwd})`);
  }
}

let step = 0;
function check(what, fn) {
  const t = performance.now();
  const note = fn();
  step++;
  console.log(`  ok ${step} ${what}${note ? `: ${note}` : ""} (${Math.round(performance.now() - t)} ms)`);
}

const packages = rootPkg.workspaces
  .map((dir) => ({ dir: join(root, dir), pkg: readJson(join(root, dir, "package.json")) }))
  .filter(({ pkg }) => !pkg.private);
const names = new Set(packages.map(({ pkg }) => pkg.name));

const work = mkdtempSync(join(tmpdir(), "keel-consumer-"));
const tarballs = join(work, "tarballs");
const app = join(work, "app");
mkdirSync(tarballs);
mkdirSync(app);
let failed = true;
try {
  console.log(`consumer smoke: ${[...names].join(", ")} in ${work}`);

  check("pack every public workspace (clean prepack build)", () => {
    const out = sh(
      "npm",
      ["pack", "--json", "--pack-destination", tarballs, ...packages.flatMap(({ pkg }) => ["-w", pkg.name])],
      root,
      "npm pack",
    );
    const packed = JSON.parse(out.slice(out.indexOf("[")));
    for (const p of packed) {
      const entry = packages.find(({ pkg }) => pkg.name === p.name);
      entry.tarball = join(tarballs, p.filename);
      const files = new Set(p.files.map((f) => f.path));
      for (const required of ["README.md", "LICENSE", "package.json"])
        if (!files.has(required)) throw new Error(`${p.name}: the tarball has no ${required}`);
      const tests = [...files].filter((f) => /\.test\.[cm]?[jt]s$/.test(f));
      if (tests.length) throw new Error(`${p.name}: the tarball ships tests: ${tests.join(", ")}`);
    }
    return packed.map((p) => `${p.name} ${p.entryCount} files`).join(", ");
  });

  // Peers at the repository's pinned versions (the versions its own tests run against).
  const peers = {};
  for (const { pkg } of packages)
    for (const [name, range] of Object.entries(pkg.peerDependencies ?? {}))
      if (!names.has(name)) peers[name] = pins[name] ?? range;
  const tools = Object.fromEntries(["vitest", "vite", "@types/node"].map((n) => [n, pins[n]]));
  writeFileSync(
    join(app, "package.json"),
    `${JSON.stringify(
      {
        name: "keel-consumer",
        private: true,
        type: "module",
        dependencies: Object.fromEntries(packages.map(({ pkg, tarball }) => [pkg.name, `file:${tarball}`])),
        devDependencies: { ...peers, ...tools },
      },
      null,
      2,
    )}\n`,
  );

  check("install the tarballs into a new project", () => {
    // Install scripts run as a user's would, but for better-sqlite3's: it compiles from source here
    // (its prebuilt download is unreachable), two minutes that `npm ci` already spent on the same
    // Node, so its built addon is copied from the repository's own install instead.
    sh(
      "npm",
      ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", "--ignore-scripts"],
      app,
      "npm install",
    );
    const addon = join(root, "node_modules", "better-sqlite3", "build");
    if (existsSync(join(app, "node_modules", "better-sqlite3")) && existsSync(addon))
      cpSync(addon, join(app, "node_modules", "better-sqlite3", "build"), { recursive: true });
    const scripted = ["esbuild", "msgpackr-extract"].filter((n) => existsSync(join(app, "node_modules", n)));
    if (scripted.length > 0) sh("npm", ["rebuild", "--loglevel=error", ...scripted], app, "npm rebuild");
    for (const { pkg } of packages) {
      const installed = join(app, "node_modules", ...pkg.name.split("/"));
      if (!existsSync(installed) || existsSync(join(installed, "node_modules", ".bin", "tsc")))
        throw new Error(`${pkg.name} is not installed from its tarball`);
    }
    return `peers ${Object.entries(peers)
      .map(([n, v]) => `${n}@${v}`)
      .join(", ")}`;
  });

  // Every entry point, from the exports maps.
  const entries = [];
  for (const { pkg } of packages)
    for (const key of Object.keys(pkg.exports ?? { ".": null }))
      entries.push({ pkg: pkg.name, key, specifier: key === "." ? pkg.name : `${pkg.name}${key.slice(1)}` });
  const codeEntries = entries.filter((e) => !e.key.endsWith(".json"));

  check("every file named by exports and by the source maps is in the package", () => {
    let maps = 0;
    for (const { pkg } of packages) {
      const dir = join(app, "node_modules", ...pkg.name.split("/"));
      const targets = [];
      const walk = (v) => (typeof v === "string" ? targets.push(v) : Object.values(v ?? {}).forEach(walk));
      walk(pkg.exports);
      for (const t of targets)
        if (!existsSync(join(dir, t))) throw new Error(`${pkg.name}: exports names ${t}, not in the package`);
      const mapFiles = (d) =>
        readdirSync(d, { withFileTypes: true }).flatMap((f) =>
          f.isDirectory() ? mapFiles(join(d, f.name)) : f.name.endsWith(".map") ? [join(d, f.name)] : [],
        );
      for (const m of mapFiles(join(dir, "dist"))) {
        maps++;
        for (const s of readJson(m).sources)
          if (!existsSync(resolve(dirname(m), s)))
            throw new Error(`${pkg.name}: ${relative(dir, m)} names ${s}, not in the package`);
      }
    }
    return `${maps} maps`;
  });

  check("import every entry point from ESM", () => {
    const lines = entries.map(
      (e, i) =>
        `import * as m${i} from ${JSON.stringify(e.specifier)}${e.key.endsWith(".json") ? ' with { type: "json" }' : ""};`,
    );
    lines.push(
      `const counts = [${entries.map((_, i) => `Object.keys(m${i}).length`).join(", ")}];`,
      "if (counts.some((n) => n === 0)) throw new Error('an entry point exports nothing: ' + counts);",
      "console.log(counts.join(' '));",
    );
    writeFileSync(join(app, "imports.mjs"), `${lines.join("\n")}\n`);
    sh("node", ["imports.mjs"], app, "importing the entry points");
    return codeEntries.map((e) => e.specifier).join(", ");
  });

  check("require() every entry point from CommonJS (require(esm), what engines promises)", () => {
    // `engines` admits Node 20.19+ and 22.12+ because there `require()` loads an ES module unflagged:
    // a CommonJS project's `require("@keel/core")` must work on the Node this check runs on.
    if (!process.features.require_module)
      throw new Error(`node ${process.version} has no require(esm); engines admits only versions that do`);
    const lines = codeEntries.map((e, i) => `const m${i} = require(${JSON.stringify(e.specifier)});`);
    lines.push(
      `const counts = [${codeEntries.map((_, i) => `Object.keys(m${i}).length`).join(", ")}];`,
      "if (counts.some((n) => n === 0)) throw new Error('an entry point required empty: ' + counts);",
      "console.log(counts.join(' '));",
    );
    writeFileSync(join(app, "requires.cjs"), `${lines.join("\n")}\n`);
    // Without --no-warnings: an ExperimentalWarning is fine, a failure is not.
    sh("node", ["requires.cjs"], app, "requiring the entry points");
    return `${codeEntries.length} entry points on ${process.version}`;
  });

  check("bundle every entry point with esbuild, and run them with tsx, under the source condition", () => {
    writeFileSync(
      join(app, "source.mjs"),
      `${codeEntries.map((e, i) => `export * as m${i} from ${JSON.stringify(e.specifier)};`).join("\n")}\n`,
    );
    // Keel's packages are bundled from their src (the source condition), the peers stay external.
    sh(
      bin("esbuild"),
      [
        "source.mjs",
        "--bundle",
        "--platform=node",
        "--format=esm",
        "--conditions=source",
        ...Object.keys(peers).map((n) => `--external:${n}`),
        "--log-level=warning",
        "--outfile=/dev/null",
      ],
      app,
      "esbuild --conditions=source",
    );
    // And run from the TypeScript sources, as `tsx --conditions=source` (the repo's own way) does.
    sh(bin("tsx"), ["--conditions=source", "imports.mjs"], app, "tsx --conditions=source");
  });

  check("bundle a program minified (tree-shaken under sideEffects: false) and run it", () => {
    writeFileSync(
      join(app, "hello.mjs"),
      `import { constant, retry, run, sleep, timeout } from "@keel/core";
let calls = 0;
console.log(await run(() => retry(() => timeout(20, function* attempt() {
  if (++calls < 2) yield* sleep(1000);
  return "hello, world";
}), { attempts: 3, backoff: constant(10) })));
`,
    );
    sh(
      bin("esbuild"),
      ["hello.mjs", "--bundle", "--minify", "--platform=node", "--format=esm", "--outfile=hello.bundle.mjs"],
      app,
      "esbuild (minified)",
    );
    const out = sh("node", ["hello.bundle.mjs"], app, "the minified bundle").trim();
    if (out !== "hello, world") throw new Error(`the minified bundle printed ${JSON.stringify(out)}`);
    return `${(readFileSync(join(app, "hello.bundle.mjs")).length / 1000).toFixed(1)} KB`;
  });

  writeFileSync(
    join(app, "consumer.ts"),
    `${[
      ...codeEntries.map((e, i) => `import * as m${i} from ${JSON.stringify(e.specifier)};`),
      'import { retry, run, sleep, timeout, type Operation } from "@keel/core";',
      'import { createHarness } from "@keel/testing";',
      "",
      "function* hello(): Operation<string> {",
      '  return yield* retry(() => timeout(100, function* () { yield* sleep(10); return "hello"; }), { attempts: 2 });',
      "}",
      "const h = createHarness();",
      "const greeting: PromiseLike<string> = h.run(hello);",
      "const plain: PromiseLike<string> = run(hello);",
      `export const all = [greeting, plain, ${codeEntries.map((_, i) => `m${i}`).join(", ")}];`,
    ].join("\n")}\n`,
  );
  for (const [resolution, module] of [
    ["node16", "node16"],
    ["bundler", "esnext"],
  ]) {
    check(`type-check a consumer under moduleResolution ${resolution}`, () => {
      const config = `tsconfig.${resolution}.json`;
      writeFileSync(
        join(app, config),
        JSON.stringify({
          compilerOptions: {
            module,
            moduleResolution: resolution,
            target: "ES2022",
            lib: ["ES2023"],
            types: ["node"],
            strict: true,
            noEmit: true,
            skipLibCheck: false,
          },
          files: ["consumer.ts"],
        }),
      );
      sh(bin("tsc"), ["-p", config], app, `tsc (${resolution})`);
    });
  }

  check("run a vitest test that uses @keel/testing", () => {
    mkdirSync(join(app, "test"));
    writeFileSync(
      join(app, "test", "smoke.test.ts"),
      `import { constant, retry, run, scoped, sleep, timeout } from "@keel/core";
import { createHttpClient } from "@keel/core/http";
import { createFaultServer, createHarness } from "@keel/testing";
import { expect, test } from "vitest";

test("a minute of retries on the virtual clock", async () => {
  const h = createHarness();
  let calls = 0;
  const value = await h.run(() =>
    retry(() => timeout(1000, function* attempt() {
      h.mark(\`attempt \${++calls}\`);
      if (calls < 3) yield* sleep(60_000);
      return calls;
    }), { attempts: 3, backoff: constant(500) }),
  );
  expect(value).toBe(3);
  expect(h.log).toEqual(["attempt 1@0", "attempt 2@1500", "attempt 3@3000"]);
  await h.expectClean();
});

test("the HTTP client against the fault server", async () => {
  const body = await run(() => scoped(function* () {
    const server = yield* createFaultServer({ "/hello": { status: 200, json: { hello: "world" } } });
    const client = yield* createHttpClient({ baseUrl: server.url });
    return yield* client.getJson<{ hello: string }>("/hello");
  }));
  expect(body).toEqual({ hello: "world" });
});
`,
    );
    const out = sh(join(app, "node_modules", ".bin", "vitest"), ["run", "--reporter=dot"], app, "vitest");
    const summary = stripVTControlCharacters(out).match(/Tests +(\d+) passed/);
    if (summary?.[1] !== "2") throw new Error(`vitest did not pass 2 tests:\n${out}`);
    return `${summary[1]} tests passed`;
  });

  check("a project on bullmq 5 installs @keel/worker with a plain npm install (no ERESOLVE)", () => {
    // A team that already runs BullMQ 5 (and its ioredis) adds Keel: plain `npm install` of the
    // tarballs packed above, no --force or --legacy-peer-deps, and `@keel/worker/bullmq` loads on
    // the bullmq 5 the project had.
    const legacy = join(work, "bullmq5-app");
    mkdirSync(legacy);
    const bullmq5 = "5.81.5";
    writeFileSync(
      join(legacy, "package.json"),
      `${JSON.stringify({ name: "bullmq5-app", private: true, type: "module" }, null, 2)}\n`,
    );
    const npmInstall = (...specs) =>
      sh(
        "npm",
        ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", ...specs],
        legacy,
        `npm install ${specs.map((s) => (s.startsWith("/") ? relative(work, s) : s)).join(" ")} (a project on bullmq 5)`,
      );
    npmInstall(`bullmq@${bullmq5}`, "ioredis@5.11.1");
    const keel = packages.filter(({ pkg }) => pkg.name === "@keel/core" || pkg.name === "@keel/worker");
    npmInstall(...keel.map(({ tarball }) => tarball));
    const installed = readJson(join(legacy, "node_modules", "bullmq", "package.json")).version;
    if (installed !== bullmq5)
      throw new Error(`installing Keel replaced bullmq ${bullmq5} with ${installed}`);
    writeFileSync(
      join(legacy, "load.mjs"),
      `const bull = await import("@keel/worker/bullmq");
const worker = await import("@keel/worker");
if (typeof bull.useBullQueue !== "function" || typeof worker.useWorker !== "function") throw new Error("missing exports");
console.log("loaded");
`,
    );
    const out = sh("node", ["load.mjs"], legacy, "importing @keel/worker/bullmq on bullmq 5").trim();
    if (out !== "loaded") throw new Error(`load.mjs printed ${JSON.stringify(out)}`);
    return `bullmq ${installed}, ioredis ${readJson(join(legacy, "node_modules", "ioredis", "package.json")).version}`;
  });

  check("publint --strict on every tarball", () => {
    for (const { tarball } of packages) sh(bin("publint"), ["run", tarball, "--strict"], root, "publint");
  });

  failed = false;
  console.log(
    `consumer smoke: ok, ${packages.length} packages, ${codeEntries.length} entry points, ${step} checks in ${(
      (performance.now() - started) / 1000
    ).toFixed(1)} s`,
  );
} finally {
  if (failed) console.log(`consumer smoke: FAILED (the project is kept in ${work})`);
  else if (!process.env.KEEP) rmSync(work, { recursive: true, force: true });
}

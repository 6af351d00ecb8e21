/**
 * The documentation's examples run, so they cannot rot: every program in docs/examples/ and every
 * TSDoc `@example` block in packages/core/src, packages/testing/src, packages/worker/src, packages/otel/src
 * and packages/workflow/src.
 *
 * Both sets run through docs/test/run-examples.ts, one child process per set (the two run in
 * parallel): starting `tsx` once per program would cost more than all the programs together.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { errorCodes } from "@keel/core";
import { beforeAll, describe, expect, it } from "vitest";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const runner = path.join(root, "docs/test/run-examples.ts");
const tsx = path.join(root, "node_modules/.bin/tsx");
// Inside node_modules, so that "@keel/core" and "@keel/testing" resolve to the workspace packages.
const cacheDir = path.join(root, "node_modules/.cache/keel-examples");

interface Result {
  file: string;
  ok: boolean;
  ms: number;
  problems: string[];
  lingeringTimers: number;
  output: string;
}

interface Run {
  code: number | null;
  results: Map<string, Result>;
  stdout: string;
  stderr: string;
}

/** One TSDoc `@example` block: where it is, what it documents, and its code. */
interface TsdocExample {
  source: string;
  exportName: string;
  code: string;
  file: string;
}

function listFiles(dir: string, keep: (name: string) => boolean): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...listFiles(full, keep));
    else if (keep(entry.name)) out.push(full);
  }
  return out.sort();
}

/**
 * Finds every ```ts fence after an `@example` tag in a `/** … *\/` comment, and names it by the
 * declaration that follows the comment.
 */
function extractExamples(source: string, text: string): Omit<TsdocExample, "file">[] {
  const found: Omit<TsdocExample, "file">[] = [];
  const comment = /\/\*\*([\s\S]*?)\*\//g;
  for (let m = comment.exec(text); m; m = comment.exec(text)) {
    const body = m[1]!
      .split("\n")
      .map((line) => line.replace(/^\s*\* ?/, ""))
      .join("\n");
    const after = text.slice(comment.lastIndex);
    const decl =
      /^\s*export\s+(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?(?:function\*?|class|const|let|interface|type)\s+(\w+)/.exec(
        after,
      );
    const exportName = decl?.[1] ?? "(module)";
    const fence = /@example[^\n]*\n\s*```(?:ts|typescript)\n([\s\S]*?)\n\s*```/g;
    for (let f = fence.exec(body); f; f = fence.exec(body)) {
      found.push({ source, exportName, code: `${f[1]!.trim()}\n` });
    }
  }
  return found;
}

function collectTsdocExamples(): TsdocExample[] {
  const sources = [
    ...listFiles(path.join(root, "packages/core/src"), (n) => n.endsWith(".ts") && !n.endsWith(".test.ts")),
    ...listFiles(
      path.join(root, "packages/testing/src"),
      (n) => n.endsWith(".ts") && !n.endsWith(".test.ts"),
    ),
    ...listFiles(path.join(root, "packages/worker/src"), (n) => n.endsWith(".ts") && !n.endsWith(".test.ts")),
    ...listFiles(path.join(root, "packages/otel/src"), (n) => n.endsWith(".ts") && !n.endsWith(".test.ts")),
    ...listFiles(
      path.join(root, "packages/workflow/src"),
      (n) => n.endsWith(".ts") && !n.endsWith(".test.ts"),
    ),
  ];
  const examples: TsdocExample[] = [];
  const used = new Map<string, number>();
  for (const full of sources) {
    const source = path.relative(root, full);
    for (const ex of extractExamples(source, readFileSync(full, "utf8"))) {
      const base = `${source
        .replace(/^packages\//, "")
        .replace(/\/src\//, "-")
        .replace(/\.ts$/, "")
        .replaceAll("/", "-")}-${ex.exportName}`;
      const n = (used.get(base) ?? 0) + 1;
      used.set(base, n);
      examples.push({ ...ex, file: path.join(cacheDir, `${base}${n > 1 ? `-${n}` : ""}.ts`) });
    }
  }
  return examples;
}

function runPrograms(files: string[], runnerArgs: string[] = []): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      tsx,
      ["--conditions=source", runner, ...runnerArgs, ...files],
      { cwd: root, timeout: 170_000, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, NO_COLOR: "1" } },
      (error, stdout, stderr) => {
        const results = new Map<string, Result>();
        let output: string[] = [];
        for (const line of stdout.split("\n")) {
          if (line.startsWith("@@keel-example:start ")) output = [];
          else if (line.startsWith("@@keel-example:result ")) {
            const r = JSON.parse(line.slice("@@keel-example:result ".length)) as Omit<Result, "output">;
            results.set(r.file, { ...r, output: output.join("\n") });
          } else output.push(line);
        }
        const code = error ? (typeof error.code === "number" ? error.code : null) : 0;
        resolve({ code, results, stdout, stderr });
      },
    );
  });
}

/** Every non-blank line of `snippet` appears in `file`, in the same order (the file may have more). */
function expectLinesInOrder(snippet: string, file: string): void {
  const lines = file.split("\n").map((l) => l.trimEnd());
  let at = 0;
  for (const line of snippet.split("\n").map((l) => l.trimEnd())) {
    if (line.trim() === "") continue;
    const found = lines.indexOf(line, at);
    expect(found, `line not found (in order): ${line}`).toBeGreaterThanOrEqual(0);
    at = found + 1;
  }
}

function explain(run: Run, file: string): string {
  const r = run.results.get(file);
  if (!r) return `no result: the runner stopped before it (exit ${run.code})\n${run.stderr}`;
  return [...r.problems, r.output && `output:\n${r.output}`, run.stderr && `stderr:\n${run.stderr}`]
    .filter(Boolean)
    .join("\n");
}

const programs = listFiles(path.join(root, "docs/examples"), (n) => n.endsWith(".ts"));
const guidePages = listFiles(path.join(root, "docs/guide"), (n) => n.endsWith(".md"));
const tsdoc = collectTsdocExamples();
// An example that imports `main` serves until SIGINT/SIGTERM: it runs alone and is sent SIGINT.
const waitsForSignal = (ex: TsdocExample) =>
  /import\s*(?:type\s*)?\{[^}]*\bmain\b[^}]*\}\s*from\s*"@keel\/core"/.test(ex.code);
const tsdocPlain = tsdoc.filter((ex) => !waitsForSignal(ex));
const tsdocSignal = tsdoc.filter(waitsForSignal);

let programRun: Run;
let tsdocRun: Run;
const signalRuns = new Map<string, Run>();

beforeAll(async () => {
  rmSync(cacheDir, { recursive: true, force: true });
  mkdirSync(cacheDir, { recursive: true });
  // Inside node_modules the nearest package.json is not the workspace's, so say ESM here.
  writeFileSync(path.join(cacheDir, "package.json"), '{ "type": "module" }\n');
  for (const ex of tsdoc) writeFileSync(ex.file, `// ${ex.source}: ${ex.exportName}\n${ex.code}`);
  const signalled = tsdocSignal.map(async (ex) => {
    signalRuns.set(ex.file, await runPrograms([ex.file], ["--signal", "SIGINT"]));
  });
  [programRun, tsdocRun] = await Promise.all([
    runPrograms(programs),
    runPrograms(tsdocPlain.map((e) => e.file)),
    ...signalled,
  ]);
}, 180_000); // a hang guard, not a timing check: on a loaded 2-core machine these programs take minutes

describe("docs/examples programs", () => {
  it.each(programs.map((f) => [path.relative(root, f), f]))("%s runs to completion", (_name, file) => {
    const r = programRun.results.get(file);
    expect(r, explain(programRun, file)).toBeDefined();
    expect(r!.problems, explain(programRun, file)).toEqual([]);
  });

  it("the runner itself exits 0", () => {
    expect(programRun.code, programRun.stderr).toBe(0);
  });
});

describe("docs/guide pages", () => {
  const linked = (text: string) =>
    [...text.matchAll(/\]\((?:\.\.\/|docs\/)examples\/([\w-]+\.ts)\)/g)].map((m) => m[1]!);

  it.each(guidePages.map((f) => [path.relative(root, f), f]))(
    "%s links a runnable example",
    (_name, page) => {
      const names = linked(readFileSync(page, "utf8"));
      expect(names.length).toBeGreaterThan(0);
      for (const name of names) expect(programs).toContain(path.join(root, "docs/examples", name));
    },
  );

  it("every program in docs/examples is linked from a page or the README", () => {
    const all = [...guidePages, path.join(root, "README.md")].flatMap((f) => linked(readFileSync(f, "utf8")));
    const orphans = programs.map((f) => path.basename(f)).filter((name) => !all.includes(name));
    expect(orphans).toEqual([]);
  });

  it("errors.md has one row per code of errorCodes, with its retryability, and no other", () => {
    const page = readFileSync(path.join(root, "docs/guide/errors.md"), "utf8");
    const rows = page.split("\n").filter((line) => /^\| `KEEL_[A-Z_]+` \|/.test(line));
    const documented = rows.map((row) => /^\| `(KEEL_[A-Z_]+)`/.exec(row)![1]);
    expect(documented.sort()).toEqual(Object.keys(errorCodes).sort());
    for (const [code, { retryable }] of Object.entries(errorCodes)) {
      const row = rows.find((line) => line.startsWith(`| \`${code}\` |`));
      const cell = typeof retryable === "string" ? `| ${retryable} |` : retryable ? "| yes |" : "| no |";
      expect(row, `errors.md row for ${code}`).toContain(cell);
    }
  });

  it("events.md names every event type of observe/events.ts", () => {
    const source = readFileSync(path.join(root, "packages/core/src/observe/events.ts"), "utf8");
    const types = [...source.matchAll(/readonly type: "([a-z]+:[a-z]+)"/g)].map((m) => m[1]!);
    const page = readFileSync(path.join(root, "docs/guide/events.md"), "utf8");
    expect(types.length).toBeGreaterThanOrEqual(11);
    expect(types.filter((t) => !page.includes(`\`${t}\``))).toEqual([]);
  });

  it("every relative link in the guide and the README resolves, anchors included", () => {
    const slug = (heading: string) =>
      heading
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s-]/gu, "")
        .trim()
        .replace(/\s/g, "-");
    const anchorsOf = (file: string) =>
      [...readFileSync(file, "utf8").matchAll(/^#+ (.+)$/gm)].map((m) => slug(m[1]!));
    const broken: string[] = [];
    for (const page of [...guidePages, path.join(root, "README.md")]) {
      const text = readFileSync(page, "utf8");
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        const [file, anchor] = target!.split("#");
        const resolved = file ? path.resolve(path.dirname(page), file) : page;
        if (!existsSync(resolved)) broken.push(`${path.relative(root, page)}: ${target}`);
        else if (anchor && !anchorsOf(resolved).includes(anchor))
          broken.push(`${path.relative(root, page)}: ${target} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("the README example is docs/examples/quick-start.ts", () => {
    const readme = readFileSync(path.join(root, "README.md"), "utf8");
    const block = /```ts\n([\s\S]*?)```/.exec(readme)![1]!;
    expectLinesInOrder(block, readFileSync(path.join(root, "docs/examples/quick-start.ts"), "utf8"));
  });

  it("the vitest test printed in testing.md is docs/test/testing-guide.test.ts", () => {
    const page = readFileSync(path.join(root, "docs/guide/testing.md"), "utf8");
    const block = [...page.matchAll(/```ts\n([\s\S]*?)```/g)]
      .map((m) => m[1]!)
      .find((b) => b.includes("vitest"));
    expect(block).toBeDefined();
    expectLinesInOrder(block!, readFileSync(path.join(root, "docs/test/testing-guide.test.ts"), "utf8"));
  });
});

describe("TSDoc @example blocks in packages/*/src", () => {
  it("the extractor finds the examples", () => {
    expect(tsdoc.length).toBeGreaterThanOrEqual(25);
  });

  it.each(tsdocPlain.map((e) => [`${e.source} ${e.exportName}`, e.file]))(
    "%s runs to completion",
    (_name, file) => {
      const r = tsdocRun.results.get(file);
      expect(r, explain(tsdocRun, file)).toBeDefined();
      expect(r!.problems, explain(tsdocRun, file)).toEqual([]);
    },
  );

  it("the runner itself exits 0", () => {
    expect(tsdocRun.code, tsdocRun.stderr).toBe(0);
  });

  it.each(tsdocSignal.map((e) => [`${e.source} ${e.exportName}`, e.file]))(
    "%s shuts down on SIGINT with exit code 130",
    (_name, file) => {
      const run = signalRuns.get(file)!;
      expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(130);
      expect(run.stderr).toMatch(/SIGINT received/);
    },
  );
});

describe("every program lets its process exit", () => {
  it("no program leaves a host timer pending once its work is done", () => {
    const offenders = [...programRun.results.values(), ...tsdocRun.results.values()]
      .filter((r) => r.lingeringTimers > 0)
      .map((r) => path.relative(root, r.file));
    expect(
      offenders,
      "these programs leave a host timer pending after their work is done: `node program` would not exit until it fires",
    ).toEqual([]);
  });
});

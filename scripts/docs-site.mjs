#!/usr/bin/env node
/**
 * `npm run docs`: the static site, the guide (`docs/guide`) and the API reference (the TSDoc of the
 * four entry points), built by typedoc into `docs/site/`.
 *
 * typedoc reads TypeScript through its compiler API, which TypeScript 7 no longer has: the docs
 * workspace pins its own TypeScript 5.9 beside typedoc (`docs/package.json`), and the repository's
 * TypeScript 7 is untouched.
 *
 * The guide is copied to `docs/.site-guide/` first, each page given the front matter typedoc reads
 * (its first heading as `title`), so the pages stay plain Markdown on GitHub; the site lists them in
 * the guide index's reading order (the order its links first name them), then any page the index
 * does not link, by name. `docs/typedoc.json` holds the rest: module names as users import them, and
 * validation with warnings as errors, so a broken link or an undocumented export fails the build.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const docs = resolve(dirname(fileURLToPath(import.meta.url)), "..", "docs");
const guide = join(docs, "guide");
const staged = join(docs, ".site-guide");

const pages = readdirSync(guide).filter((f) => f.endsWith(".md"));
const index = readFileSync(join(guide, "index.md"), "utf8");
const linked = [...index.matchAll(/\]\(([a-z0-9-]+\.md)(#[^)]*)?\)/g)].map((m) => m[1]);
const order = [...new Set([...linked, ...pages.sort()])].filter((p) => p !== "index.md" && pages.includes(p));

rmSync(staged, { recursive: true, force: true });
mkdirSync(staged);
for (const page of pages) {
  const text = readFileSync(join(guide, page), "utf8");
  // Navigation titles are plain text (typedoc drops a title with backticks for the file name).
  const title = (text.match(/^# (.+)$/m)?.[1] ?? page.replace(/\.md$/, "")).replaceAll("`", "");
  writeFileSync(join(staged, page), `---\ntitle: ${JSON.stringify(title)}\n---\n\n${text}`);
}

try {
  execFileSync(
    join(docs, "node_modules", ".bin", "typedoc"),
    [
      "--options",
      "typedoc.json",
      "--readme",
      ".site-guide/index.md",
      ...order.flatMap((p) => ["--projectDocuments", `.site-guide/${p}`]),
    ],
    { cwd: docs, stdio: "inherit" },
  );
} catch {
  console.error(
    "docs: typedoc failed (its warnings are errors: a broken link or an undocumented export, above)",
  );
  process.exitCode = 1;
} finally {
  rmSync(staged, { recursive: true, force: true });
}

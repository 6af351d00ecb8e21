/**
 * Facts the guide states about the runtime, checked against the runtime itself: when the code and
 * the page disagree, this fails instead of a reader finding out.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { run, scoped } from "@keel/core";
import { createHttpClient } from "@keel/core/http";
import { describe, expect, it } from "vitest";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const page = (name: string) => readFileSync(path.join(root, "docs/guide", name), "utf8");

/** The paragraph of `text` that contains `phrase` (paragraphs are separated by a blank line). */
function paragraphWith(text: string, phrase: string): string {
  const found = text.split(/\n\s*\n/).find((p) => p.replace(/\s+/g, " ").includes(phrase));
  if (!found) throw new Error(`no paragraph says "${phrase}"`);
  return found.replace(/\s+/g, " ");
}

describe("what the guide says, against the runtime", () => {
  it("http.md names the error of a client used after its scope ended, with its code", async () => {
    const thrown = await run(function* () {
      const client = yield* scoped(() => createHttpClient({ baseUrl: "http://127.0.0.1:9" }));
      try {
        yield* client.get("/");
      } catch (e) {
        return e as { code?: string; message?: string };
      }
      return null;
    });
    expect(thrown?.code).toBe("KEEL_CLIENT_CLOSED");
    const said = paragraphWith(page("http.md"), "A client used after its scope has ended");
    expect(said).toContain(`\`${thrown!.code}\``);
    expect(said).toContain(thrown!.message);
  });
});

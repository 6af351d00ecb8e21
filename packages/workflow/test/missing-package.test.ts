/**
 * A store whose peer is not installed fails where it is made, with a `MissingPackageError` naming
 * the package and the command that installs it: for real, in a child process where `pg` and
 * `better-sqlite3` cannot be found (the worker's fixtures/unresolvable.mjs). A PostgreSQL store
 * given a pool of the caller's own does not load `pg` at all.
 */
import { isMissingPackageError } from "@keel/workflow";
import { describe, expect, it } from "vitest";
import { CHILD_TEST_TIMEOUT_MS, startChildWith } from "../../core/test/support/child.js";

describe("a store's missing peer", () => {
  it(
    "is a MissingPackageError naming pg or better-sqlite3 and its install command; a given pool needs no pg",
    async () => {
      const child = startChildWith(
        {
          imports: [new URL("../../worker/test/fixtures/unresolvable.mjs", import.meta.url)],
          env: { KEEL_UNRESOLVABLE: "pg,better-sqlite3" },
        },
        new URL("./fixtures/missing-peers.ts", import.meta.url),
      );
      const exit = await child.exited;
      expect({ stdout: child.stdoutLines(), stderr: child.stderr() }).toEqual({
        stdout: [
          "caught KEEL_MISSING_PACKAGE pg MissingPackageError",
          "createPostgresStore: the package pg is not installed; the PostgreSQL store needs it: npm install pg",
          "caught KEEL_MISSING_PACKAGE better-sqlite3 MissingPackageError",
          "createSqliteStore: the package better-sqlite3 is not installed; the SQLite store needs it: npm install better-sqlite3",
          "made",
        ],
        stderr: "",
      });
      expect(exit.code).toBe(0);
    },
    CHILD_TEST_TIMEOUT_MS,
  );

  it("is told by its code, across copies", () => {
    expect(isMissingPackageError({ code: "KEEL_MISSING_PACKAGE" })).toBe(true);
    expect(isMissingPackageError(new Error("Cannot find module 'pg'"))).toBe(false);
    expect(isMissingPackageError(null)).toBe(false);
  });
});

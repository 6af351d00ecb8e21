/**
 * The SQLite store against the store contract, each test on a file of its own in a temporary
 * directory (removed at the end); and two real processes claiming from one file at once.
 */
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createSqliteStore } from "@keel/workflow/sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { CHILD_TEST_TIMEOUT_MS, startChild } from "../../core/test/support/child.js";
import { describeStoreContract } from "./store-contract.js";

const dir = mkdtempSync(path.join(tmpdir(), "keel-sqlite-"));
let files = 0;

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the SQLite store", () => {
  describeStoreContract("sqlite", async () => {
    const store = createSqliteStore({
      path: path.join(dir, `contract-${++files}.db`),
      synchronous: "normal",
    });
    await store.init();
    return { store, cleanup: () => store.close() };
  });
});

describe("the SQLite store's write-ahead log", () => {
  it("stays bounded over many writes: the automatic checkpoint runs", async () => {
    const file = path.join(dir, "wal.db");
    const store = createSqliteStore({ path: file, synchronous: "normal" });
    await store.init();
    for (let i = 0; i < 2_000; i++) {
      const id = `e${i}`;
      await store.create({ id, workflow: "w", version: 1, input: { i }, deadlineAt: null, nowMs: i });
      await store.requestCancel(id, "enough", i);
    }
    await store.signal("e0", "go", null, 1);
    // The checkpoint runs every 1,000 pages (4 MB); uncheckpointed, 4,000 writes made ~75 MB.
    expect(statSync(`${file}-wal`).size).toBeLessThan(8 * 1024 * 1024);
    await store.close();
  });
});

describe("the SQLite store, shared by processes", () => {
  it(
    "two processes claiming from one file at once never claim one execution twice",
    async () => {
      const file = path.join(dir, "shared.db");
      const store = createSqliteStore({ path: file });
      await store.init();
      const ids = Array.from({ length: 600 }, (_, i) => `e${String(i).padStart(3, "0")}`);
      for (const id of ids)
        await store.create({ id, workflow: "w", version: 1, input: null, deadlineAt: null, nowMs: 0 });
      const children = ["proc-a", "proc-b"].map((owner) =>
        startChild(new URL("./fixtures/sqlite-claimer.ts", import.meta.url), file, owner),
      );
      await Promise.all(children.map((c) => c.waitForLine("ready")));
      writeFileSync(`${file}.go`, "");
      const exits = await Promise.all(children.map((c) => c.exited));
      expect(
        exits.map((e) => e.code),
        children.map((c) => c.stderr()).join("\n"),
      ).toEqual([0, 0]);
      const claimedBy = children.map((c) =>
        c.stdoutLines().flatMap((l) => (l.startsWith("claimed ") ? [l.slice("claimed ".length)] : [])),
      );
      const all = claimedBy.flat();
      expect(new Set(all).size).toBe(all.length);
      expect([...all].sort()).toEqual(ids);
      expect(Math.min(...claimedBy.map((c) => c.length)), "both processes claimed").toBeGreaterThan(0);
      // Each finished what it claimed, under its own claim: no write was lost to the other.
      const outputs = await store.list({ status: "completed", limit: 1_000 });
      expect(outputs).toHaveLength(ids.length);
      for (const [i, owner] of ["proc-a", "proc-b"].entries())
        for (const id of claimedBy[i]!) expect(outputs.find((r) => r.id === id)?.output).toBe(owner);
      console.log(`sqlite, two processes: ${claimedBy.map((c) => c.length).join(" + ")} claims`);
      await store.close();
    },
    CHILD_TEST_TIMEOUT_MS * 2,
  );
});

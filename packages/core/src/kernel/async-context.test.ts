import { AsyncLocalStorage } from "node:async_hooks";
import { afterEach, describe, expect, it, vi } from "vitest";

afterEach(() => {
  vi.unstubAllGlobals();
  vi.resetModules();
});

describe("captureAsyncContext", () => {
  it("captures the storages' stores in force at the call, and enters them later", async () => {
    const { captureAsyncContext } = await import("./async-context.js");
    const store = new AsyncLocalStorage<string>();
    const captured = store.run("A", () => captureAsyncContext());
    const seen = store.run("B", () =>
      captured.runInAsyncScope((suffix) => `${store.getStore()}${suffix}`, null, "!"),
    );
    expect(seen).toBe("A!");
  });

  it("without node:async_hooks (no process.getBuiltinModule) the module loads and calls straight through", async () => {
    vi.stubGlobal("process", { ...process, getBuiltinModule: undefined });
    const { captureAsyncContext, NO_ASYNC_CONTEXT } = await import("./async-context.js");
    const captured = captureAsyncContext();
    expect(captured).toBe(NO_ASYNC_CONTEXT);
    expect(captured.runInAsyncScope((n: number) => n + 1, null, 41)).toBe(42);
  });
});

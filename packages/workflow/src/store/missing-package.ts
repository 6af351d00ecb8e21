/**
 * A store's optional peer package that is not installed (`pg`, `better-sqlite3`): the typed error
 * that names it with the command that installs it, and the loader that raises it. The peers are
 * CommonJS and loaded with `require`, so a store is made synchronously and fails at once, where it
 * is made, rather than at its first query.
 * @module
 */
import { createRequire } from "node:module";
import { KeelError } from "@keel/core";

/**
 * A package a store needs is not installed. The message names the package and the command that
 * installs it; `cause` is Node's own module-not-found error.
 *
 * @example
 * ```ts
 * import { isMissingPackageError, MissingPackageError } from "@keel/workflow";
 * const e = new MissingPackageError("createSqliteStore", "better-sqlite3", "the SQLite store needs it");
 * console.log(isMissingPackageError(e), e.message);
 * // true createSqliteStore: the package better-sqlite3 is not installed; the SQLite store needs it: npm install better-sqlite3
 * ```
 */
export class MissingPackageError extends KeelError {
  /** Nothing to wait out: the store cannot work until the package is installed. */
  readonly fatal = true;
  constructor(
    where: string,
    readonly packageName: string,
    purpose: string,
    options?: { cause?: unknown },
  ) {
    super(
      "KEEL_MISSING_PACKAGE",
      `${where}: the package ${packageName} is not installed; ${purpose}: npm install ${packageName}`,
      options,
    );
    this.name = "MissingPackageError";
  }
}

/**
 * True for a {@link MissingPackageError} (also `@keel/worker/bullmq`'s: the code is the same), across
 * duplicate package copies.
 *
 * @example
 * ```ts
 * import { isMissingPackageError } from "@keel/workflow";
 * console.log(isMissingPackageError(new Error("Cannot find module 'pg'"))); // false
 * ```
 */
export function isMissingPackageError(e: unknown): e is MissingPackageError {
  return (e as { code?: unknown } | null)?.code === "KEEL_MISSING_PACKAGE";
}

const requireHere = createRequire(import.meta.url);

/**
 * `require(name)`, with a {@link MissingPackageError} when `name` itself cannot be found (a package
 * that is there but cannot load, a missing dependency of it included, keeps its own error).
 */
export function loadPeer<T>(name: string, where: string, purpose: string): T {
  try {
    return requireHere(name) as T;
  } catch (e) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    const notFound = code === "MODULE_NOT_FOUND" || code === "ERR_MODULE_NOT_FOUND";
    if (notFound && typeof message === "string" && message.includes(`'${name}'`))
      throw new MissingPackageError(where, name, purpose, { cause: e });
    throw e;
  }
}

/**
 * Argument checks for the packages built on Keel (`@keel/worker`, `@keel/workflow`): bad input is a
 * typed error whose message names the parameter, the rule and the value, with the code
 * `KEEL_INVALID_ARGUMENT` (as `@keel/core`'s own checks). One copy here, exported as
 * {@link argumentChecks}, so that each package's messages read the same.
 * @module
 */

function describe(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "function") return `function ${v.name || "(anonymous)"}`;
  if (v === null || typeof v !== "object") return String(v);
  return Array.isArray(v) ? "an array" : "an object";
}

function coded<E extends Error>(e: E): E {
  Object.defineProperty(e, "code", { value: "KEEL_INVALID_ARGUMENT", enumerable: true });
  return e;
}

function invalidType(parameter: string, rule: string, got: unknown): TypeError {
  return coded(new TypeError(`${parameter}: expected ${rule}, got ${describe(got)}`));
}

function invalidRange(parameter: string, rule: string, got: unknown): RangeError {
  return coded(new RangeError(`${parameter}: expected ${rule}, got ${describe(got)}`));
}

/** A duration: a number ≥ 0, finite unless `allowInfinity`; `min` for those that must be positive. */
function checkMs(parameter: string, v: unknown, { allowInfinity = true, min = 0 } = {}): number {
  const ok = typeof v === "number" && !Number.isNaN(v) && v >= min && (allowInfinity || v !== Infinity);
  const bound = min > 0 ? `> 0` : "≥ 0";
  if (!ok)
    throw invalidRange(
      parameter,
      allowInfinity ? `a number ${bound} (or Infinity)` : `a finite number ${bound}`,
      v,
    );
  return v;
}

function checkWhole(parameter: string, v: unknown, min: number): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min)
    throw invalidRange(parameter, `a whole number ≥ ${min}`, v);
  return v;
}

function checkObject(parameter: string, v: unknown): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw invalidType(parameter, "an object", v);
  return v as Record<string, unknown>;
}

/** Refuses keys the API does not know: a misspelt option must not be silently ignored. */
function checkKeys(parameter: string, v: Record<string, unknown>, known: readonly string[]): void {
  for (const key of Object.keys(v)) {
    if (!known.includes(key))
      throw invalidType(`${parameter} { ${key} }`, `one of the known options (${known.join(", ")})`, key);
  }
}

/**
 * The argument checks the packages built on Keel share: `invalidType` and `invalidRange` make the
 * typed errors, `checkMs` (a duration), `checkWhole` (a whole number), `checkObject` and
 * `checkKeys` (an options object with no unknown key) throw them.
 *
 * @example
 * ```ts
 * import { argumentChecks } from "@keel/core";
 * const { checkKeys, checkMs, checkObject } = argumentChecks;
 * const options = checkObject("poll(options)", { everyMs: 250 });
 * checkKeys("poll(options)", options, ["everyMs"]);
 * console.log(checkMs("poll(options) { everyMs }", options.everyMs)); // 250
 * try { checkMs("poll(options) { everyMs }", -1); } catch (e) { console.log((e as Error).message); }
 * // poll(options) { everyMs }: expected a number ≥ 0 (or Infinity), got -1
 * ```
 */
export const argumentChecks = Object.freeze({
  invalidType,
  invalidRange,
  checkMs,
  checkWhole,
  checkObject,
  checkKeys,
});

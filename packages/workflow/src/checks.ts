/**
 * The argument checks this package shares with the others built on Keel (`argumentChecks` in
 * `@keel/core`): the same messages and code everywhere.
 * @module
 */
import { argumentChecks } from "@keel/core";

export const { invalidType, invalidRange, checkMs, checkWhole, checkObject, checkKeys } = argumentChecks;

/** What `await op` rejects with, for the tests that every Keel operation refuses `await`. */
import { isKeelError, type KeelError } from "@keel/core";

export async function awaitedError(op: object): Promise<KeelError> {
  try {
    await (op as unknown as Promise<unknown>);
  } catch (e) {
    if (isKeelError(e)) return e;
    throw e;
  }
  throw new Error("await resolved");
}

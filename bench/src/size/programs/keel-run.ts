/** Keel's floor: `run` alone, the kernel that every program bundles. */
import { run } from "@keel/core";

console.log(
  await run(function* hello() {
    return "hello, world";
  }),
);

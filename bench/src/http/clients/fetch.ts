/**
 * Node's global `fetch` (its bundled undici, with its default global Agent: no cap on connections).
 * @module
 */
import { checkReply, type HttpPeer } from "../peer.js";
import { promisePasses } from "./workers.js";

export const peer: HttpPeer = {
  async run(plan) {
    const url = `${plan.origin}${plan.path}`;
    return await promisePasses(plan, async () => {
      const res = await fetch(url);
      if (!res.ok) {
        await res.body?.cancel();
        throw new Error(`bench: status ${res.status}`);
      }
      checkReply(await res.json());
    });
  },
};

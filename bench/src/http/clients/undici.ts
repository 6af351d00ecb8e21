/**
 * Plain undici 7: `request` on an Agent with Keel's pool shape (10 connections, no pipelining), then
 * `JSON.parse` of the body text. undici's own header and body timeouts stay at their defaults.
 * @module
 */
import { Agent, request } from "undici";
import { CONNECTIONS, checkReply, type HttpPeer } from "../peer.js";
import { promisePasses } from "./workers.js";

export const peer: HttpPeer = {
  async run(plan) {
    const agent = new Agent({ connections: CONNECTIONS, pipelining: 1 });
    const url = `${plan.origin}${plan.path}`;
    try {
      return await promisePasses(plan, async () => {
        const { statusCode, body } = await request(url, { dispatcher: agent });
        if (statusCode < 200 || statusCode >= 300) {
          await body.dump();
          throw new Error(`bench: status ${statusCode}`);
        }
        checkReply(JSON.parse(await body.text()));
      });
    } finally {
      await agent.close();
    }
  },
};

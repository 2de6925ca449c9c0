/** `mesh status`: asks the node listening at --listen:--port how it is. */
import type { Config } from "../config/config.ts";
import { CommandError, localUrl } from "./common.ts";

export async function showStatus(config: Config, json: boolean): Promise<void> {
  const url = localUrl(config);
  let health: unknown;
  try {
    const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(5000) });
    health = await res.json();
  } catch {
    throw new CommandError(`no node answering at ${url} (start one with \`mesh\`, or point --listen/--port at it)`);
  }
  console.log(json ? JSON.stringify({ url, health }, null, 2) : `node at ${url}: ${JSON.stringify(health)}`);
}

/** What the commands share: the error that means "the command failed" (exit 1), and the local URL. */
import type { Config } from "../config/config.ts";

export class CommandError extends Error {}

/** The URL a client on this machine uses to reach a node listening on `listen`. */
export function localUrl(config: Pick<Config, "listen" | "port">): string {
  const host = config.listen === "0.0.0.0" ? "127.0.0.1" : config.listen === "::" ? "::1" : config.listen;
  return `http://${host.includes(":") ? `[${host}]` : host}:${config.port}`;
}

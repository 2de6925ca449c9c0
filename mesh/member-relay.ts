/**
 * Which relay a member's address may be dialed through (pure). A member's peer list names a relay
 * URL for each member it knows, and a dial goes to that URL: taken as given, a member could make
 * every node open HTTP and QUIC connections to any host and port it likes. A node dials only the
 * relays it would use itself: the ones it was given (`--relay URL`, the token's), or with the
 * default, the public relays of its iroh line.
 */
import type { TransportLine } from "./transport-kit.ts";

/** The hosts of each line's public relays (`use1-1.relay.n0.iroh.link.` and the like). */
const PUBLIC_RELAY_DOMAIN: Record<TransportLine, string> = { iroh1: ".relay.n0.iroh.link", iroh035: ".relay.iroh.network" };

const parsed = (url: string): URL | undefined => {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
};

export function dialableRelay(relayUrl: string | undefined, own: "default" | "disabled" | readonly string[], line: TransportLine): string | undefined {
  if (relayUrl === undefined || own === "disabled") return undefined;
  const url = parsed(relayUrl);
  if (!url || url.username || url.password) return undefined;
  // What is dialed is what was checked: our own entry, or the URL as parsed here.
  if (Array.isArray(own)) return own.find((o) => parsed(o)?.href === url.href);
  const host = url.hostname.replace(/\.$/, "");
  return url.protocol === "https:" && url.port === "" && host.endsWith(PUBLIC_RELAY_DOMAIN[line]) ? url.href : undefined;
}

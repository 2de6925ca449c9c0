/** A member's relay URL is dialed only when this node would use that relay itself. */
import { expect, test } from "bun:test";
import { dialableRelay } from "../../mesh/member-relay.ts";

const OWN = ["https://relay.example.org/", "http://127.0.0.1:3340"];
test.each([
  ["no relay named", undefined, "default", "iroh1", undefined],
  ["relays off here", "https://use1-1.relay.n0.iroh.link./", "disabled", "iroh1", undefined],
  ["a public 1.x relay, default relays", "https://use1-1.relay.n0.iroh.link./", "default", "iroh1", "https://use1-1.relay.n0.iroh.link./"],
  ["a public 0.35 relay on 0.35", "https://euw1-1.relay.iroh.network./", "default", "iroh035", "https://euw1-1.relay.iroh.network./"],
  ["a 0.35 relay named to a 1.x node", "https://euw1-1.relay.iroh.network./", "default", "iroh1", undefined],
  ["a look-alike host", "https://relay.n0.iroh.link.evil.example/", "default", "iroh1", undefined],
  ["a public relay's name on another port", "https://use1-1.relay.n0.iroh.link:8443/", "default", "iroh1", undefined],
  ["plain http to a public relay's name", "http://use1-1.relay.n0.iroh.link/", "default", "iroh1", undefined],
  ["with credentials", "https://user:pw@use1-1.relay.n0.iroh.link/", "default", "iroh1", undefined],
  ["any host a member chose", "http://169.254.169.254/", "default", "iroh1", undefined],
  // What is dialed is this node's own entry, not the member's spelling of it.
  ["one of this node's own relays", "https://relay.example.org", OWN, "iroh1", "https://relay.example.org/"],
  ["this node's own loopback relay", "http://127.0.0.1:3340/", OWN, "iroh1", "http://127.0.0.1:3340"],
  ["a relay not among this node's own", "https://other.example.org/", OWN, "iroh1", undefined],
  ["not a URL", "::::", "default", "iroh1", undefined],
] as const)("%s", (_, url, own, line, expected) => expect(dialableRelay(url, own, line)).toBe(expected));

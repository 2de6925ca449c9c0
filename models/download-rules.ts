/**
 * The rules a URL download of a model obeys, as pure decisions: which URLs and addresses a source
 * may reach, by who named it; how large its file may grow; and that its first bytes are GGUF's
 * magic. The operator's own sources (models.json, flags) may be any http(s) URL: the operator
 * can reach their own network anyway. A source a peer announced is data from another machine:
 * https only, and only to public unicast addresses (an allowlist: whatever is not known to be
 * public is refused), so a member cannot make us fetch from our loopback, LAN or cloud metadata.
 */
import { isIP } from "node:net";
import ipaddr from "ipaddr.js";

/** What a URL download may connect to; none at all (the operator's own source) means any http(s) URL. */
export interface SourceRule {
  /** Who named the URL, for error messages ("a source a peer announced"). */
  who: string;
  /** URL schemes allowed, with their colon (`https:`). */
  schemes: readonly string[];
  /** Whether a connection may go to this address (IPv4 dotted or IPv6 text). */
  allowsAddress: (address: string) => boolean;
}

const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR("2000::/3");

/**
 * Whether `address` is a public unicast address: not loopback, private (RFC 1918, fc00::/7),
 * CGNAT, link-local (cloud metadata lives there), unspecified, multicast, broadcast, documentation
 * or otherwise reserved, in any spelling. IPv4-mapped IPv6 is judged as the IPv4 it carries; other
 * IPv6 must be global unicast (2000::/3), which leaves out the old IPv4-compatible `::a.b.c.d`,
 * NAT64, 6to4 and Teredo forms through which a private IPv4 address could be reached.
 */
export function isPublicUnicast(address: string): boolean {
  // Only canonical spellings: `0x7f.1` or `2130706433` are 127.0.0.1 to some parsers and not to others.
  const family = isIP(address);
  if (family === 0 || address.includes("%")) return false;
  const ip = ipaddr.parse(address);
  if (ip.kind() === "ipv4") return ip.range() === "unicast";
  const v6 = ip as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().range() === "unicast";
  return v6.range() === "unicast" && v6.match(GLOBAL_UNICAST_V6);
}

/** The rule for a source a peer announced: https to public addresses only. */
export const PEER_SOURCE_RULE: SourceRule = { who: "a source a peer announced", schemes: ["https:"], allowsAddress: isPublicUnicast };

/** A URL's host as an address or a name, without IPv6 brackets. */
export function bareHost(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, "$1");
}

/** Whether `url` carries a user name or password: the operator's secret, never told to peers. */
export function hasCredentials(url: string): boolean {
  try {
    const u = new URL(url);
    return u.username !== "" || u.password !== "";
  } catch {
    return false;
  }
}

/** `text` as peers may read it: a URL without its user name and password; anything else as it is. */
export function withoutCredentials(text: string): string {
  if (!hasCredentials(text)) return text;
  const u = new URL(text);
  u.username = "";
  u.password = "";
  return u.href;
}

/**
 * Why `url` may not be fetched under `rule`, or undefined. Checked on every redirect hop. Any
 * port is allowed: the address rule is what keeps our own network out of reach, and on a public
 * host a port that speaks no TLS ends the request at the handshake.
 */
export function urlProblem(url: URL, rule: SourceRule): string | undefined {
  if (!rule.schemes.includes(url.protocol)) return `${url.protocol.replace(/:$/, "")} is not allowed (${rule.schemes.map((s) => s.replace(/:$/, "")).join(" or ")} only)`;
  // Credentials a peer chose would be sent to a host it chose.
  if (url.username !== "" || url.password !== "") return "it carries a user name or password";
  const host = bareHost(url);
  if (host === "") return "it names no host";
  if (isIP(host) !== 0 && !rule.allowsAddress(host)) return `${host} is not a public address`;
  return undefined;
}

/** Why a host that resolved to `addresses` may not be connected to, or undefined: every address must pass. */
export function addressesProblem(host: string, addresses: readonly string[], rule: SourceRule): string | undefined {
  if (addresses.length === 0) return `${host} resolves to no address`;
  const refused = addresses.filter((a) => !rule.allowsAddress(a));
  if (refused.length > 0) return `${host} resolves to ${refused.join(", ")}, not a public address`;
  return undefined;
}

/** The checked address the connection is pinned to: IPv4 first, as many hosts have no IPv6 route. */
export function pinnedAddress(addresses: readonly string[]): string {
  return addresses.find((a) => isIP(a) === 4) ?? addresses[0]!;
}

/** How large a downloaded file may be. */
export interface SizeLimit {
  maxBytes: number;
  /** A response that states no total length is refused (the cap would otherwise be the disk). */
  requireLength: boolean;
  /** Where the cap comes from, for the error. */
  why: string;
}

/** Room left free on the models disk whatever a peer's source says. */
export const FREE_SPACE_MARGIN = 2 ** 30;

/**
 * The cap on a file from a source a peer announced: the size a peer announced for the model
 * (0 when it is only a seed: then the server must state a length), and never past the free space
 * of the models disk less a margin.
 */
export function peerSizeLimit(announcedBytes: number, freeBytes: number): SizeLimit {
  const room = Math.max(0, freeBytes - FREE_SPACE_MARGIN);
  if (announcedBytes > 0 && announcedBytes <= room) return { maxBytes: announcedBytes, requireLength: false, why: `the ${announcedBytes} bytes the mesh announced for it` };
  return { maxBytes: room, requireLength: announcedBytes <= 0, why: `the free space of the models dir less ${FREE_SPACE_MARGIN / 2 ** 30} GiB (${room} bytes)` };
}

/** Why a response whose file is `total` bytes (undefined: not stated) is refused under `limit`, or undefined. */
export function sizeProblem(total: number | undefined, limit: SizeLimit | undefined): string | undefined {
  if (!limit) return undefined;
  if (total === undefined) return limit.requireLength ? "the server states no length, and nobody announced the file's size" : undefined;
  if (total > limit.maxBytes) return `the server states ${total} bytes, more than ${limit.why}`;
  return undefined;
}

const GGUF_MAGIC = new TextEncoder().encode("GGUF");

/**
 * Whether `chunk`, written at `offset` of a file, agrees with GGUF's magic where it overlaps the
 * first four bytes: a page of HTML, or any other file, is stopped at its first chunk.
 */
export function agreesWithGgufMagic(offset: number, chunk: Uint8Array): boolean {
  for (let i = offset; i < GGUF_MAGIC.length && i - offset < chunk.length; i++) if (chunk[i - offset] !== GGUF_MAGIC[i]) return false;
  return true;
}

/**
 * What a peer's list of a model's files may have this node write (pure). Its weights may not add up
 * to more than the mesh announced for the model (nodes announce the weights, not the projector),
 * and what is still to arrive (less the bytes already here, in place or in parts) may not take the
 * free space below FREE_SPACE_MARGIN. Undefined when it may; else why not. (A file that changed on
 * the sender since its list is not taken at all: the list is checked against the model's content.)
 */
export function copyRoom(
  files: readonly { name: string; size: number }[],
  projector: string,
  announcedBytes: number,
  freeBytes: number,
  alreadyHere: (name: string) => number,
): string | undefined {
  const weights = files.filter((f) => f.name !== projector).reduce((sum, f) => sum + f.size, 0);
  const toArrive = files.reduce((sum, f) => sum + Math.max(0, f.size - alreadyHere(f.name)), 0);
  const room = Math.max(0, freeBytes - FREE_SPACE_MARGIN);
  if (announcedBytes > 0 && weights > announcedBytes) return `the peer lists ${weights} bytes of weights, more than the ${announcedBytes} bytes the mesh announced for it`;
  if (toArrive > room) return `${toArrive} bytes are still to arrive, more than the free space of the models dir less ${FREE_SPACE_MARGIN / 2 ** 30} GiB (${room} bytes)`;
  return undefined;
}

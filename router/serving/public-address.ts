/**
 * Which addresses this node may fetch a client's image from (pure): public ones only. Loopback,
 * private, link-local, CGNAT, unspecified, multicast, broadcast, reserved and documentation ranges,
 * ULA and site-local IPv6, and an IPv4 address of those carried inside IPv6 (IPv4-mapped, NAT64,
 * 6to4) are refused, unless the operator allows the host, or the address, with `--media-hosts`.
 * A name is judged by EVERY address it resolves to: which one a connection gets is not ours to choose.
 */
import { isIP } from "node:net";

function ipv4Bytes(text: string): number[] | undefined {
  if (isIP(text) !== 4) return undefined;
  return text.split(".").map(Number);
}

function ipv6Bytes(text: string): number[] | undefined {
  let t = text.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  if (isIP(t) !== 6) return undefined;
  // An IPv4 tail (`::ffff:10.0.0.1`) as its two groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(t);
  if (dotted) {
    const v4 = ipv4Bytes(dotted[1]!);
    if (!v4) return undefined;
    t = `${t.slice(0, dotted.index)}${((v4[0]! << 8) | v4[1]!).toString(16)}:${((v4[2]! << 8) | v4[3]!).toString(16)}`;
  }
  const groups = (s: string) => (s === "" ? [] : s.split(":"));
  const [head, tail] = t.includes("::") ? t.split("::").map(groups) : [groups(t), undefined];
  const all = tail === undefined ? head! : [...head!, ...Array<string>(8 - head!.length - tail.length).fill("0"), ...tail];
  if (all.length !== 8) return undefined;
  return all.flatMap((g) => {
    const n = parseInt(g, 16);
    return [n >> 8, n & 0xff];
  });
}

/** An address as bytes, or undefined when `text` is not one; IPv4 as 4 bytes, IPv6 as 16. */
export function addressBytes(text: string): number[] | undefined {
  return ipv4Bytes(text) ?? ipv6Bytes(text);
}

type Range = { prefix: number[]; bits: number; kind: string };

const range = (cidr: string, kind: string): Range => {
  const [addr, bits] = cidr.split("/");
  return { prefix: addressBytes(addr!)!, bits: Number(bits), kind: `${kind} (${cidr})` };
};

const inRange = (bytes: readonly number[], r: Range): boolean => {
  if (bytes.length !== r.prefix.length) return false;
  for (let bit = 0; bit < r.bits; bit += 8) {
    const take = Math.min(8, r.bits - bit);
    const mask = (0xff << (8 - take)) & 0xff;
    if ((bytes[bit / 8]! & mask) !== (r.prefix[bit / 8]! & mask)) return false;
  }
  return true;
};

/** IPv4 that is no one's public address; the first match names it (broadcast before the rest of 240/4). */
const V4_RANGES: readonly Range[] = [
  range("0.0.0.0/8", "unspecified"),
  range("10.0.0.0/8", "private"),
  range("100.64.0.0/10", "shared (CGNAT)"),
  range("127.0.0.0/8", "loopback"),
  range("169.254.0.0/16", "link-local"),
  range("172.16.0.0/12", "private"),
  range("192.0.0.0/24", "reserved"),
  range("192.0.2.0/24", "documentation"),
  range("192.168.0.0/16", "private"),
  range("198.18.0.0/15", "benchmarking"),
  range("198.51.100.0/24", "documentation"),
  range("203.0.113.0/24", "documentation"),
  range("224.0.0.0/4", "multicast"),
  range("255.255.255.255/32", "broadcast"),
  range("240.0.0.0/4", "reserved"),
];

/** IPv6 forms that carry an IPv4 address: it decides (the bytes it sits at). */
const V6_CARRYING_V4: readonly (Range & { at: number })[] = [
  { ...range("::ffff:0:0/96", "IPv4-mapped"), at: 12 },
  { ...range("64:ff9b::/96", "NAT64"), at: 12 },
  { ...range("2002::/16", "6to4"), at: 2 },
];

const V6_RANGES: readonly Range[] = [
  range("::/128", "unspecified"),
  range("::1/128", "loopback"),
  range("::/96", "IPv4-compatible (deprecated)"),
  range("64:ff9b:1::/48", "local NAT64"),
  range("100::/64", "discard"),
  range("2001:db8::/32", "documentation"),
  range("fc00::/7", "unique local (ULA)"),
  range("fe80::/10", "link-local"),
  range("fec0::/10", "site-local"),
  range("ff00::/8", "multicast"),
];
const GLOBAL_UNICAST = range("2000::/3", "global");

/** Why `ip` is not a public address, or undefined when it is one. */
export function addressRefusal(ip: string): string | undefined {
  const bytes = addressBytes(ip);
  if (!bytes) return "not an IP address";
  if (bytes.length === 4) return V4_RANGES.find((r) => inRange(bytes, r))?.kind;
  for (const carrier of V6_CARRYING_V4) {
    if (!inRange(bytes, carrier)) continue;
    const inner = V4_RANGES.find((r) => inRange(bytes.slice(carrier.at, carrier.at + 4), r));
    return inner && `${carrier.kind.split(" ")[0]} ${inner.kind}`;
  }
  const kind = V6_RANGES.find((r) => inRange(bytes, r))?.kind;
  if (kind !== undefined) return kind;
  return inRange(bytes, GLOBAL_UNICAST) ? undefined : "reserved (outside 2000::/3)";
}

/** How a host or address is compared with `--media-hosts`: an address by its bytes (IPv4-mapped as IPv4), a name in lower case without a final dot. */
export function hostKey(host: string): string {
  const bytes = addressBytes(host);
  if (!bytes) return host.trim().toLowerCase().replace(/\.$/, "");
  const v4 = bytes.length === 16 && inRange(bytes, V6_CARRYING_V4[0]!) ? bytes.slice(12) : bytes;
  return `ip:${v4.join(".")}`;
}

/**
 * Why `host` (a name, or a literal IP) that resolved to `addresses` may not be fetched from, or
 * undefined when it may: a host the operator allows may be anywhere; any other, every address it
 * has must be public or itself allowed (one private address among public ones is enough to refuse:
 * which one a connection gets is not ours to choose).
 */
export function hostRefusal(host: string, addresses: readonly string[], allowHosts: readonly string[]): string | undefined {
  const allowed = new Set(allowHosts.map(hostKey));
  if (allowed.has(hostKey(host))) return undefined;
  if (addresses.length === 0) return `its host ${host} has no address`;
  for (const address of addresses) {
    if (allowed.has(hostKey(address))) continue;
    const why = addressRefusal(address);
    if (why === undefined) continue;
    const named = addressBytes(host) ? address : `${host} (${address})`;
    return `its host ${named} is not a public address: ${why}; the node's operator may allow a host with --media-hosts`;
  }
  return undefined;
}

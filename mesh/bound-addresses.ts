/**
 * The addresses a node is reachable at, worked out from what its QUIC sockets are bound to and the
 * machine's interfaces, before the endpoint itself says (pure). A socket bound to one host is
 * reachable there; one bound to the wildcard is reachable at every address of its family the
 * interfaces have, loopback only when there is nothing else (as a peer elsewhere cannot use it).
 * IPv6 link-local addresses are left out: they need a scope a peer's dial does not carry.
 */

/** A bound socket: its host as text (`127.0.0.1`, `::`, no brackets) and its port. */
export interface BoundSocket {
  host: string;
  port: number;
}

/** What `os.networkInterfaces()` returns, as much of it as is read here. */
export type Interfaces = Record<string, readonly { address: string; family: string | number; internal: boolean }[] | undefined>;

/** `127.0.0.1:4000` or `[::1]:4000` as host and port, or undefined when it is neither. */
export function parseSocketAddr(text: string): BoundSocket | undefined {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|(\d{1,3}(?:\.\d{1,3}){3})):(\d{1,5})$/.exec(text);
  if (!m) return undefined;
  const port = Number(m[3]);
  if (port > 65_535) return undefined;
  return { host: (m[1] ?? m[2])!, port };
}

export function formatSocketAddr(s: BoundSocket): string {
  return s.host.includes(":") ? `[${s.host}]:${s.port}` : `${s.host}:${s.port}`;
}

const isV4 = (family: string | number) => family === "IPv4" || family === 4;
const isLinkLocalV6 = (ip: string) => /^fe[89ab]/i.test(ip);

/** Addresses of one family from the interfaces: `regular` ones and `loopback` ones. */
function interfaceIps(interfaces: Interfaces, v4: boolean): { regular: string[]; loopback: string[] } {
  const regular: string[] = [];
  const loopback: string[] = [];
  for (const list of Object.values(interfaces)) {
    for (const a of list ?? []) {
      if (isV4(a.family) !== v4) continue;
      if (a.internal) loopback.push(a.address);
      else if (v4 || !isLinkLocalV6(a.address)) regular.push(a.address);
    }
  }
  return { regular, loopback };
}

/** The socket addresses peers can dial, IPv4 ones first, without repeats. */
export function reachableAddresses(bound: { v4?: BoundSocket; v6?: BoundSocket }, interfaces: Interfaces): string[] {
  const families = [
    { socket: bound.v4, v4: true, wildcard: "0.0.0.0" },
    { socket: bound.v6, v4: false, wildcard: "::" },
  ];
  const regular: string[] = [];
  const loopback: string[] = [];
  for (const { socket, v4, wildcard } of families) {
    if (!socket) continue;
    if (socket.host !== wildcard) {
      regular.push(formatSocketAddr(socket));
      continue;
    }
    const ips = interfaceIps(interfaces, v4);
    regular.push(...ips.regular.map((host) => formatSocketAddr({ host, port: socket.port })));
    loopback.push(...ips.loopback.map((host) => formatSocketAddr({ host, port: socket.port })));
  }
  return [...new Set(regular.length ? regular : loopback)];
}

/** Whether two address lists name the same addresses, in any order. */
export function sameAddresses(a: readonly string[], b: readonly string[]): boolean {
  const sa = [...new Set(a)].sort();
  const sb = [...new Set(b)].sort();
  return sa.length === sb.length && sa.every((x, i) => x === sb[i]);
}

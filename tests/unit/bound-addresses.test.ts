import { describe, expect, test } from "bun:test";
import { formatSocketAddr, parseSocketAddr, reachableAddresses, sameAddresses, type BoundSocket, type Interfaces } from "../../mesh/bound-addresses.ts";
import { nodeIdOf } from "../../mesh/transport.ts";

const lo = [
  { address: "127.0.0.1", family: "IPv4", internal: true },
  { address: "::1", family: "IPv6", internal: true },
];
const lan: Interfaces = {
  lo,
  eth0: [
    { address: "192.168.1.20", family: "IPv4", internal: false },
    { address: "fe80::1c2b:3ff:fe4d:5e6f", family: "IPv6", internal: false },
    { address: "2001:db8::20", family: "IPv6", internal: false },
  ],
  wlan0: [{ address: "10.0.0.7", family: 4, internal: false }],
};
const loopbackOnly: Interfaces = { lo };

describe("the addresses a node is reachable at before its endpoint says", () => {
  const v4 = (host: string, port = 4000): BoundSocket => ({ host, port });
  const v6 = (host: string, port = 4001): BoundSocket => ({ host, port });
  const cases: [string, { v4?: BoundSocket; v6?: BoundSocket }, Interfaces, string[]][] = [
    ["loopback binds (tests)", { v4: v4("127.0.0.1"), v6: v6("::1") }, lan, ["127.0.0.1:4000", "[::1]:4001"]],
    ["one host bound: only there", { v4: v4("192.168.1.20") }, lan, ["192.168.1.20:4000"]],
    ["an IPv6 host bound", { v6: v6("2001:db8::20") }, lan, ["[2001:db8::20]:4001"]],
    [
      "wildcards: every LAN address, no loopback, no link-local",
      { v4: v4("0.0.0.0"), v6: v6("::") },
      lan,
      ["192.168.1.20:4000", "10.0.0.7:4000", "[2001:db8::20]:4001"],
    ],
    ["wildcards on a machine with only loopback: loopback", { v4: v4("0.0.0.0"), v6: v6("::") }, loopbackOnly, ["127.0.0.1:4000", "[::1]:4001"]],
    ["an IPv4 wildcard alone", { v4: v4("0.0.0.0") }, lan, ["192.168.1.20:4000", "10.0.0.7:4000"]],
    ["a host bound and a wildcard: no loopback beside it", { v4: v4("192.168.1.20"), v6: v6("::") }, loopbackOnly, ["192.168.1.20:4000"]],
    ["nothing bound", {}, lan, []],
    ["an interface listed twice is one address", { v4: v4("0.0.0.0") }, { a: lan.wlan0, b: lan.wlan0 }, ["10.0.0.7:4000"]],
  ];
  test.each(cases)("%s", (_, bound, interfaces, expected) => expect(reachableAddresses(bound, interfaces)).toEqual(expected));
});

describe("socket address text", () => {
  test.each([
    ["127.0.0.1:0", { host: "127.0.0.1", port: 0 }],
    ["[::1]:4433", { host: "::1", port: 4433 }],
    ["0.0.0.0:65535", { host: "0.0.0.0", port: 65535 }],
    ["[::]:11204", { host: "::", port: 11204 }],
    ["localhost:0", undefined],
    ["::1:4433", undefined],
    ["127.0.0.1", undefined],
    ["127.0.0.1:65536", undefined],
    ["[::1]", undefined],
  ])("%p", (text, expected) => {
    expect(parseSocketAddr(text)).toEqual(expected);
    if (expected) expect(formatSocketAddr(expected)).toBe(text);
  });
  test("the same addresses in another order are the same; one more or less is not", () => {
    expect(sameAddresses(["127.0.0.1:1", "[::1]:2"], ["[::1]:2", "127.0.0.1:1"])).toBe(true);
    expect(sameAddresses(["127.0.0.1:1"], ["127.0.0.1:1", "[::1]:2"])).toBe(false);
    expect(sameAddresses(["127.0.0.1:1"], ["127.0.0.1:3"])).toBe(false);
  });
});

describe("node id from the secret key", () => {
  // RFC 8032 section 7.1, tests 1 and 2: secret key and the public key it gives.
  test.each([
    ["9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60", "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"],
    ["4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb", "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"],
  ])("%s", (secret, publicKey) => expect(nodeIdOf(Buffer.from(secret, "hex"))).toBe(publicKey));
});

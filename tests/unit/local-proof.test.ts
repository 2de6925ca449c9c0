/**
 * The CLI's proof that the node it dialed is its own (issue 43): bound to the address the CLI
 * dialed and the address the node listens on, so a squatter on another address that passes the
 * challenge on gets a proof for the wrong place. Tables of addresses, pure.
 */
import { expect, test } from "bun:test";
import { covers, parseSocket, proofHolds, proofOf, socketText, type SocketAddress } from "../../node/local-proof.ts";

const at = (text: string) => parseSocket(text)!;

test.each<[string, string | undefined]>([
  ["127.0.0.1:9337", "127.0.0.1:9337"],
  ["[::1]:9337", "[::1]:9337"],
  ["[::FFFF:127.0.0.1]:1", "[::ffff:127.0.0.1]:1"],
  ["localhost:9337", undefined],
  ["127.0.0.1", undefined],
  ["127.0.0.1:0", undefined],
  ["127.0.0.1:65536", undefined],
  ["::1:9337", undefined],
  ["", undefined],
])("parseSocket(%p)", (text, expected) => {
  const parsed = parseSocket(text);
  expect(parsed === undefined ? undefined : socketText(parsed)).toBe(expected);
});

test.each<[string, string, string, boolean]>([
  ["the same address", "127.0.0.1:9337", "127.0.0.1:9337", true],
  ["another loopback address (the squatter's)", "127.0.0.2:9337", "127.0.0.1:9337", false],
  ["another port", "127.0.0.1:9337", "127.0.0.1:9338", false],
  ["the IPv4 wildcard, an IPv4 address", "0.0.0.0:9337", "127.0.0.1:9337", true],
  ["the IPv4 wildcard, IPv6 loopback (another family, another socket)", "0.0.0.0:9337", "[::1]:9337", false],
  ["the IPv6 wildcard (both families)", "[::]:9337", "127.0.0.1:9337", true],
  ["IPv6 loopback, IPv4 loopback", "[::1]:9337", "127.0.0.1:9337", false],
])("covers: %s", (_, bound, dialed, expected) => expect(covers(at(bound), at(dialed))).toBe(expected));

test("a proof holds only for the address dialed, by a node bound there, under the key", () => {
  const key = "k".repeat(64);
  const challenge = "ab".repeat(32);
  const node: SocketAddress = at("127.0.0.2:9337");
  const squatter: SocketAddress = at("127.0.0.1:9337");
  const proof = proofOf(key, challenge, node, node)!;
  expect(proofHolds(key, challenge, node, node, proof)).toBe(true);
  // Relayed from the squatter's address: the node's proof names its own place, which the CLI did not dial.
  expect(proofHolds(key, challenge, node, squatter, proof)).toBe(false);
  expect(proofHolds(key, challenge, squatter, squatter, proof)).toBe(false);
  expect(proofHolds("x".repeat(64), challenge, node, node, proof)).toBe(false);
  expect(proofOf(key, "not a challenge", node, node)).toBeUndefined();
});

/** The rules of URL downloads as tables: which addresses are public, which URLs a peer may name, size caps, GGUF's magic. */
import { describe, expect, test } from "bun:test";
import {
  addressesProblem,
  agreesWithGgufMagic,
  copyRoom,
  FREE_SPACE_MARGIN,
  isPublicUnicast,
  PEER_SOURCE_RULE,
  peerSizeLimit,
  pinnedAddress,
  sizeProblem,
  urlProblem,
} from "../../models/download-rules.ts";

describe("isPublicUnicast", () => {
  test.each([
    // IPv4: public
    ["8.8.8.8", true],
    ["1.1.1.1", true],
    ["18.164.52.1", true],
    ["100.63.255.255", true], // just below CGNAT
    ["100.128.0.0", true], // just above it
    ["172.15.255.255", true],
    ["172.32.0.0", true],
    ["169.253.255.255", true],
    // IPv4: not
    ["127.0.0.1", false],
    ["127.255.255.254", false],
    ["10.0.0.1", false],
    ["172.16.0.1", false],
    ["172.31.255.255", false],
    ["192.168.1.1", false],
    ["100.64.0.1", false], // CGNAT
    ["100.127.255.255", false],
    ["169.254.169.254", false], // cloud metadata
    ["169.254.0.1", false],
    ["0.0.0.0", false],
    ["0.1.2.3", false],
    ["255.255.255.255", false],
    ["224.0.0.251", false], // multicast (mDNS)
    ["239.255.255.250", false],
    ["192.0.2.1", false], // documentation
    ["198.51.100.7", false],
    ["203.0.113.9", false],
    ["198.18.0.1", false], // benchmarking
    ["240.0.0.1", false], // reserved
    ["192.0.0.170", false],
    // Spellings a lax parser reads as loopback: refused as not canonical.
    ["2130706433", false],
    ["0x7f.0.0.1", false],
    ["0177.0.0.1", false],
    ["127.1", false],
    // IPv6: public (global unicast)
    ["2606:4700:4700::1111", true],
    ["2a00:1450:4001:80b::200e", true],
    ["::ffff:8.8.8.8", true], // mapped: judged as the IPv4 it carries
    // IPv6: not
    ["::1", false],
    ["::", false],
    ["fe80::1", false],
    ["fe80::1%eth0", false],
    ["fc00::1", false],
    ["fd00:ec2::254", false], // AWS metadata over IPv6
    ["fd12:3456::1", false],
    ["ff02::1", false],
    ["::ffff:127.0.0.1", false], // mapped loopback
    ["::ffff:7f00:1", false],
    ["::ffff:10.0.0.1", false],
    ["::ffff:169.254.169.254", false],
    ["::127.0.0.1", false], // IPv4-compatible, deprecated
    ["::7f00:1", false],
    ["64:ff9b::a00:1", false], // NAT64 of 10.0.0.1
    ["2002:a00:1::", false], // 6to4 of 10.0.0.1
    ["2001:0:4136:e378::1", false], // Teredo
    ["2001:db8::1", false], // documentation
    ["4000::1", false], // not global unicast
    // Not addresses at all
    ["localhost", false],
    ["", false],
    ["example.com", false],
  ])("%s → %p", (address, expected) => {
    expect(isPublicUnicast(address)).toBe(expected);
  });
});

describe("urlProblem under the peer rule", () => {
  test.each([
    ["https://huggingface.co/org/repo/resolve/main/m.gguf", undefined],
    ["https://example.com:8443/m.gguf", undefined],
    ["https://8.8.8.8/m.gguf", undefined],
    ["https://[2606:4700::1]/m.gguf", undefined],
    ["http://huggingface.co/m.gguf", "http is not allowed (https only)"],
    ["ftp://example.com/m.gguf", "ftp is not allowed (https only)"],
    ["file:///etc/passwd", "file is not allowed (https only)"],
    ["https://user:pass@example.com/m.gguf", "it carries a user name or password"],
    ["https://user@example.com/m.gguf", "it carries a user name or password"],
    ["https://127.0.0.1/m.gguf", "127.0.0.1 is not a public address"],
    ["https://2130706433/m.gguf", "127.0.0.1 is not a public address"], // the URL parser makes it 127.0.0.1
    ["https://0x7f.1/m.gguf", "127.0.0.1 is not a public address"],
    ["https://169.254.169.254/latest/meta-data/", "169.254.169.254 is not a public address"],
    ["https://[::1]:9337/api/status", "::1 is not a public address"],
    ["https://[::ffff:127.0.0.1]/m.gguf", "::ffff:7f00:1 is not a public address"],
    ["https://[fd00:ec2::254]/", "fd00:ec2::254 is not a public address"],
    ["https://10.0.0.5:8080/m.gguf", "10.0.0.5 is not a public address"],
    // A name passes here: its addresses are checked once resolved.
    ["https://localhost/m.gguf", undefined],
  ])("%s → %p", (url, expected) => {
    expect(urlProblem(new URL(url), PEER_SOURCE_RULE)).toBe(expected);
  });
});

describe("addressesProblem", () => {
  test.each([
    [["8.8.8.8"], undefined],
    [["8.8.8.8", "2606:4700::1"], undefined],
    [[], "h.example resolves to no address"],
    [["127.0.0.1"], "h.example resolves to 127.0.0.1, not a public address"],
    // One bad address is enough: the connection could go to any of them.
    [["8.8.8.8", "10.0.0.1"], "h.example resolves to 10.0.0.1, not a public address"],
    [["8.8.8.8", "::1", "fe80::1"], "h.example resolves to ::1, fe80::1, not a public address"],
  ])("%p → %p", (addresses, expected) => {
    expect(addressesProblem("h.example", addresses, PEER_SOURCE_RULE)).toBe(expected);
  });

  test("the connection is pinned to an IPv4 address when there is one", () => {
    expect(pinnedAddress(["2606:4700::1", "8.8.8.8"])).toBe("8.8.8.8");
    expect(pinnedAddress(["2606:4700::1"])).toBe("2606:4700::1");
  });
});

describe("size caps of a peer's source", () => {
  const GiB = 2 ** 30;
  test.each([
    // announced, free → maxBytes, requireLength
    [5 * GiB, 100 * GiB, 5 * GiB, false],
    [0, 100 * GiB, 99 * GiB, true], // a seed: the server must state a length
    [50 * GiB, 10 * GiB, 9 * GiB, false], // announced more than fits: the disk decides
    [5 * GiB, FREE_SPACE_MARGIN / 2, 0, false], // no room at all
  ])("announced %p with %p free → at most %p, length required: %p", (announced, free, maxBytes, requireLength) => {
    const limit = peerSizeLimit(announced, free);
    expect(limit.maxBytes).toBe(maxBytes);
    expect(limit.requireLength).toBe(requireLength);
  });

  test.each([
    [1000, { maxBytes: 1000, requireLength: false, why: "x" }, undefined],
    [1001, { maxBytes: 1000, requireLength: false, why: "the cap" }, "the server states 1001 bytes, more than the cap"],
    [undefined, { maxBytes: 1000, requireLength: false, why: "x" }, undefined],
    [undefined, { maxBytes: 1000, requireLength: true, why: "x" }, "the server states no length, and nobody announced the file's size"],
    [10 ** 12, undefined, undefined], // the operator's own source: no cap
  ])("%p bytes under %p → %p", (total, limit, expected) => {
    expect(sizeProblem(total, limit)).toBe(expected);
  });
});

describe("agreesWithGgufMagic", () => {
  const b = (s: string) => new TextEncoder().encode(s);
  test.each([
    [0, "GGUF\x03\x00", true],
    [0, "GG", true], // too short to tell yet
    [2, "UF and more", true],
    [4, "anything", true], // past the magic
    [0, "<!DOCTYPE html>", false],
    [0, "GGML", false],
    [1, "GUX", false],
    [3, "X", false],
    [0, "", true],
  ])("at %p, %p → %p", (offset, chunk, expected) => {
    expect(agreesWithGgufMagic(offset, b(chunk))).toBe(expected);
  });
});

describe("copyRoom: what a peer's list of files may have this node write", () => {
  const GiB = 2 ** 30;
  const files = [
    { name: "m-00001-of-00002.gguf", size: 4 * GiB },
    { name: "m-00002-of-00002.gguf", size: 4 * GiB },
    { name: "mmproj-m.gguf", size: 1 * GiB },
  ];
  const none = () => 0;
  test.each<[string, number, number, (name: string) => number, string | undefined]>([
    ["weights as announced, the projector beside them, room enough", 8 * GiB, 20 * GiB, none, undefined],
    ["weights over what the mesh announced", 4 * GiB, 20 * GiB, none, "the peer lists 8589934592 bytes of weights, more than the 4294967296 bytes"],
    ["no size announced: the disk alone bounds it", 0, 20 * GiB, none, undefined],
    ["not room for what is still to arrive", 8 * GiB, 9 * GiB, none, "9663676416 bytes are still to arrive, more than the free space of the models dir less 1 GiB"],
    ["a resumed copy: the bytes already here count", 8 * GiB, 6 * GiB, (n) => (n.startsWith("m-00001") ? 4 * GiB : n.startsWith("m-00002") ? 1 * GiB : 0), undefined],
  ])("%s", (_, announced, free, here, problem) => {
    const got = copyRoom(files, "mmproj-m.gguf", announced, free, here);
    if (problem) expect(got).toContain(problem);
    else expect(got).toBeUndefined();
  });
});

/**
 * Images by URL, fetched by the node the client called (`router/serving/image-fetch.ts`): the
 * address rule as a table (every range, IPv6 forms, IPv4 inside IPv6, the operator's allowlist),
 * each API's shape put inline, and the bounds (bytes, redirects, deadline, image check) with an
 * injected network, so nothing here leaves the process.
 */
import { describe, expect, test } from "bun:test";
import { imageBytesFor, imageUrls, inlineRemoteImages, MAX_IMAGE_FETCH_BYTES, urlRefusal, withImagesInline, type FetchIo } from "../../router/serving/image-fetch.ts";
import { addressRefusal, hostRefusal } from "../../router/serving/public-address.ts";
import { parseMediaHosts } from "../../config/values.ts";
import { gradientPng } from "../../harness/png.ts";

const PNG = gradientPng(8, 6);
const PNG_B64 = PNG.toString("base64");

describe("the address rule", () => {
  const cases: [string, string | undefined][] = [
    ["8.8.8.8", undefined],
    ["1.1.1.1", undefined],
    ["172.32.0.1", undefined],
    ["100.128.0.1", undefined],
    ["0.0.0.0", "unspecified"],
    ["0.1.2.3", "unspecified"],
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["10.0.0.1", "private (10.0.0.0/8)"],
    ["172.16.0.1", "private (172.16.0.0/12)"],
    ["172.31.255.255", "private (172.16.0.0/12)"],
    ["192.168.1.1", "private (192.168.0.0/16)"],
    ["169.254.169.254", "link-local"],
    ["100.64.0.1", "CGNAT"],
    ["100.127.255.255", "CGNAT"],
    ["224.0.0.1", "multicast"],
    ["239.255.255.250", "multicast"],
    ["255.255.255.255", "broadcast"],
    ["240.0.0.1", "reserved"],
    ["192.0.2.1", "documentation"],
    ["198.18.0.1", "benchmarking"],
    ["2001:4860:4860::8888", undefined],
    ["2606:4700:4700::1111", undefined],
    ["::", "unspecified"],
    ["0:0:0:0:0:0:0:0", "unspecified"],
    ["::1", "loopback"],
    ["0:0:0:0:0:0:0:1", "loopback"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["febf::1", "link-local"],
    ["fc00::1", "unique local"],
    ["fd12:3456::1", "unique local"],
    ["FD00::ABCD", "unique local"],
    ["ff02::1", "multicast"],
    ["fec0::1", "site-local"],
    ["2001:db8::1", "documentation"],
    ["::ffff:127.0.0.1", "IPv4-mapped loopback"],
    ["::ffff:7f00:1", "IPv4-mapped loopback"],
    ["::ffff:10.0.0.1", "IPv4-mapped private"],
    ["::ffff:169.254.169.254", "IPv4-mapped link-local"],
    ["0:0:0:0:0:ffff:c0a8:0101", "IPv4-mapped private"],
    ["::ffff:8.8.8.8", undefined],
    ["64:ff9b::7f00:1", "NAT64 loopback"],
    ["64:ff9b::8.8.8.8", undefined],
    ["2002:a00:1::1", "6to4 private"],
    ["::127.0.0.1", "IPv4-compatible"],
    ["4000::1", "reserved"],
    ["not-an-ip", "not an IP address"],
  ];
  test.each(cases)("%s: %s", (ip, why) => {
    const got = addressRefusal(ip);
    if (why === undefined) expect(got).toBeUndefined();
    else expect(got).toContain(why);
  });

  const hosts: [string, string, string[], string[], boolean][] = [
    ["a public name", "img.example", ["93.184.215.14"], [], true],
    ["a name with one private address among public ones", "img.example", ["93.184.215.14", "10.0.0.1"], [], false],
    ["a name with a mapped loopback IPv6 address", "img.example", ["::ffff:127.0.0.1"], [], false],
    ["a name that resolves to nothing", "img.example", [], [], false],
    ["a literal loopback", "127.0.0.1", ["127.0.0.1"], [], false],
    ["a literal loopback, allowed", "127.0.0.1", ["127.0.0.1"], ["127.0.0.1"], true],
    ["a literal IPv6 loopback allowed as ::1", "0:0::1", ["0:0::1"], ["::1"], true],
    ["a NAS allowed by name", "nas.local", ["192.168.1.20"], ["nas.local"], true],
    ["a NAS allowed by name, asked with a capital and a final dot", "NAS.local.", ["192.168.1.20"], ["nas.local"], true],
    ["a NAS allowed by address, under another name", "files.lan", ["192.168.1.20"], ["192.168.1.20"], true],
    ["an allowed address reached as mapped IPv6", "files.lan", ["::ffff:192.168.1.20"], ["192.168.1.20"], true],
    ["another LAN host than the allowed one", "printer.lan", ["192.168.1.21"], ["192.168.1.20", "nas.local"], false],
    ["localhost when only 127.0.0.1 is allowed (::1 is not)", "localhost", ["127.0.0.1", "::1"], ["127.0.0.1"], false],
  ];
  test.each(hosts)("%s", (_, host, addresses, allow, ok) => {
    const why = hostRefusal(host, addresses, allow);
    if (ok) expect(why).toBeUndefined();
    else expect(why).toBeString();
  });

  test("a refusal names the address and what the operator may do", () => {
    expect(hostRefusal("img.example", ["10.0.0.1"], [])).toBe("its host img.example (10.0.0.1) is not a public address: private (10.0.0.0/8); the node's operator may allow a host with --media-hosts");
  });

  test.each([
    ["https://img.example/a.png", undefined],
    ["http://img.example/a.png", undefined],
    ["file:///etc/passwd", "scheme file:"],
    ["ftp://img.example/a.png", "scheme ftp:"],
    ["gopher://img.example/", "scheme gopher:"],
    ["http://user:pw@img.example/a.png", "user name or password"],
    ["not a url", "not a URL"],
  ])("URL %s", (url, why) => {
    const got = urlRefusal(url);
    if (why === undefined) expect(got).toHaveProperty("url");
    else expect("refusal" in got ? got.refusal : "").toContain(why);
  });

  test("--media-hosts takes names and IPs as URLs write them", () => {
    expect(parseMediaHosts("NAS.local., 192.168.1.20,fd00::5,[::1]")).toEqual(["nas.local", "192.168.1.20", "fd00::5", "::1"]);
    for (const bad of ["http://nas", "nas:8080", "nas/x", "u@nas", ","]) expect(() => parseMediaHosts(bad)).toThrow();
  });

  test("the byte bound: 20 MiB, --max-body-size, and room for the base64 in the body", () => {
    expect(imageBytesFor(64 * 2 ** 20, 1000)).toBe(MAX_IMAGE_FETCH_BYTES);
    expect(imageBytesFor(4 * 2 ** 20, 0)).toBe(3 * 2 ** 20);
    expect(imageBytesFor(1000, 2000)).toBe(0);
  });
});

describe("each API's shape, inline", () => {
  const url = "https://img.example/cat.png";
  const image = { mediaType: "image/png", base64: "QUJD" };
  const chat = { model: "m", messages: [{ role: "user", content: [{ type: "text", text: "hi" }, { type: "image_url", image_url: { url, detail: "low" } }] }] };
  const chatString = { model: "m", messages: [{ role: "user", content: [{ type: "image_url", image_url: url }] }] };
  const responses = { model: "m", input: [{ role: "user", content: [{ type: "input_text", text: "hi" }, { type: "input_image", image_url: url, detail: "auto" }] }] };
  const anthropic = { model: "m", max_tokens: 4, messages: [{ role: "user", content: [{ type: "image", source: { type: "url", url } }, { type: "text", text: "hi" }] }] };
  const nested = { model: "m", messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: [{ type: "image", source: { type: "url", url } }] }] }] };

  test.each([
    ["chat image_url {url}", chat, { type: "image_url", image_url: { url: "data:image/png;base64,QUJD", detail: "low" } }],
    ["chat image_url string", chatString, { type: "image_url", image_url: "data:image/png;base64,QUJD" }],
    ["responses input_image", responses, { type: "input_image", image_url: "data:image/png;base64,QUJD", detail: "auto" }],
    ["anthropic url source", anthropic, { type: "image", source: { type: "base64", media_type: "image/png", data: "QUJD" } }],
  ] as const)("%s", (_, body, part) => {
    expect(imageUrls(body)).toEqual([url]);
    const before = JSON.stringify(body);
    const inline = withImagesInline(body, () => image) as { messages?: { content: unknown[] }[]; input?: { content: unknown[] }[] };
    expect((inline.messages ?? inline.input)![0]!.content).toContainEqual(part);
    expect(imageUrls(inline)).toEqual([]);
    // The body given is left as it was.
    expect(JSON.stringify(body)).toBe(before);
  });

  test("an Anthropic image inside a tool_result is found too", () => {
    expect(imageUrls(nested)).toEqual([url]);
    expect(JSON.stringify(withImagesInline(nested, () => image))).toContain('"type":"base64"');
  });

  test("inline images, other media, tools and schemas are no image by URL", () => {
    expect(imageUrls({ messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:image/png;base64,QUJD" } }] }] })).toEqual([]);
    expect(imageUrls({ messages: [{ role: "user", content: [{ type: "video_url", video_url: { url } }] }] })).toEqual([]);
    expect(imageUrls({ tools: [{ type: "image_url", image_url: url }], messages: [] })).toEqual([]);
  });

  test("the same URL twice is fetched once", () => {
    expect(imageUrls({ messages: [{ role: "user", content: [{ type: "image_url", image_url: url }, { type: "image_url", image_url: { url } }] }] })).toEqual([url]);
  });
});

/** An injected network: `answers[url]` (a Response, made fresh per call) and what was asked. */
function network(answers: Record<string, () => Response>, dns: Record<string, string[]> = {}) {
  const asked: { url: string; address: string; host: string | null }[] = [];
  const io: FetchIo = {
    lookup: async (host) => dns[host] ?? ["93.184.215.14"],
    get: async (url, address) => {
      asked.push({ url: url.href, address, host: url.host });
      const answer = answers[url.href];
      return answer ? answer() : new Response("no such thing", { status: 404 });
    },
  };
  return { io, asked };
}

const policy = { allowHosts: [] as string[], maxBytes: MAX_IMAGE_FETCH_BYTES };
const chatWith = (...urls: string[]) => ({ model: "m", messages: [{ role: "user", content: urls.map((url) => ({ type: "image_url", image_url: { url } })) }] });
const png = () => new Response(PNG, { headers: { "content-type": "text/plain" } });
const redirect = (to: string, status = 302) => () => new Response(null, { status, headers: { location: to } });

describe("fetching", () => {
  test("an image is fetched from the address that was checked, typed by its bytes, and put inline", async () => {
    const { io, asked } = network({ "https://img.example/a.png": png }, { "img.example": ["93.184.215.14"] });
    const out = await inlineRemoteImages(chatWith("https://img.example/a.png"), policy, io);
    expect(out).toEqual({ body: chatWith(`data:image/png;base64,${PNG_B64}`) });
    expect(asked).toEqual([{ url: "https://img.example/a.png", address: "93.184.215.14", host: "img.example" }]);
  });

  test("a private address is refused before any request", async () => {
    const { io, asked } = network({}, { "nas.lan": ["192.168.1.20"] });
    for (const url of ["http://127.0.0.1:8080/x.png", "http://[::1]/x.png", "http://[::ffff:169.254.169.254]/x.png", "http://nas.lan/x.png", "http://0x7f.1/x.png"]) {
      const out = (await inlineRemoteImages(chatWith(url), policy, io)) as { refusal: string; code: string };
      expect(out.code).toBe("remote_media_refused");
      expect(out.refusal).toStartWith(`the image at ${url} was not fetched: its host `);
      expect(out.refusal).toContain("is not a public address");
    }
    expect(asked).toEqual([]);
  });

  test("an allowed host is fetched whatever its address", async () => {
    const { io } = network({ "http://nas.lan/x.png": png }, { "nas.lan": ["192.168.1.20"] });
    expect(await inlineRemoteImages(chatWith("http://nas.lan/x.png"), { ...policy, allowHosts: ["nas.lan"] }, io)).toHaveProperty("body");
  });

  test("redirects: each hop under the rule, at most 3", async () => {
    const three = network({
      "https://img.example/1": redirect("/2"),
      "https://img.example/2": redirect("https://cdn.example/3", 301),
      "https://cdn.example/3": redirect("http://cdn.example/a.png", 307),
      "http://cdn.example/a.png": png,
    });
    expect(await inlineRemoteImages(chatWith("https://img.example/1"), policy, three.io)).toHaveProperty("body");
    expect(three.asked.map((a) => a.url)).toEqual(["https://img.example/1", "https://img.example/2", "https://cdn.example/3", "http://cdn.example/a.png"]);

    const four = network({ "https://img.example/0": redirect("/1"), "https://img.example/1": redirect("/2"), "https://img.example/2": redirect("/3"), "https://img.example/3": redirect("/a.png"), "https://img.example/a.png": png });
    expect(await inlineRemoteImages(chatWith("https://img.example/0"), policy, four.io)).toMatchObject({ code: "remote_media_refused", refusal: expect.stringContaining("redirects more than 3 times") });
    expect(four.asked).toHaveLength(4);

    for (const to of ["http://169.254.169.254/latest/meta-data", "file:///etc/passwd", "http://internal.lan/x.png"]) {
      const hop = network({ "https://img.example/r": redirect(to) }, { "internal.lan": ["10.1.1.1"] });
      const out = await inlineRemoteImages(chatWith("https://img.example/r"), policy, hop.io);
      expect(out).toMatchObject({ code: "remote_media_refused", refusal: expect.stringContaining(`it redirects to ${to}`) });
      expect(hop.asked).toHaveLength(1);
    }
  });

  test("the byte bound stops the read, with or without a Content-Length", async () => {
    let pulls = 0;
    const endless = () =>
      new Response(
        new ReadableStream({
          pull(controller) {
            pulls++;
            controller.enqueue(new Uint8Array(64 * 1024));
          },
        }),
      );
    const { io } = network({ "https://img.example/big": endless, "https://img.example/declared": () => new Response("x", { headers: { "content-length": "999999999" } }) });
    const out = await inlineRemoteImages(chatWith("https://img.example/big"), { ...policy, maxBytes: 1024 * 1024 }, io);
    expect(out).toMatchObject({ code: "remote_media_failed", refusal: expect.stringContaining("larger than the 1048576 bytes") });
    expect(pulls).toBeLessThan(40);
    expect(await inlineRemoteImages(chatWith("https://img.example/declared"), policy, io)).toMatchObject({ refusal: expect.stringContaining("larger than") });
  });

  test("the bound is for all of a request's images together", async () => {
    const { io } = network({ "https://img.example/a.png": png, "https://img.example/b.png": () => new Response(gradientPng(9, 6)) });
    expect(await inlineRemoteImages(chatWith("https://img.example/a.png", "https://img.example/b.png"), { ...policy, maxBytes: PNG.length + 10 }, io)).toMatchObject({ refusal: expect.stringContaining("the image at https://img.example/b.png") });
  });

  test("not an image, a status, a deadline, a name that does not resolve", async () => {
    const hang = () => new Response(new ReadableStream({ pull: () => new Promise(() => {}) }));
    const { io } = network({ "https://img.example/junk": () => new Response("hello, not an image"), "https://img.example/webp": () => new Response(Buffer.from("RIFF\x1a\x00\x00\x00WEBPVP8 ", "binary")), "https://img.example/slow": hang });
    expect(await inlineRemoteImages(chatWith("https://img.example/junk"), policy, io)).toEqual({ code: "invalid_image", refusal: "the image at https://img.example/junk is not an image (its bytes are no PNG, JPEG, GIF or BMP)" });
    expect(await inlineRemoteImages(chatWith("https://img.example/missing"), policy, io)).toMatchObject({ code: "remote_media_failed", refusal: expect.stringContaining("answered status 404") });
    expect(await inlineRemoteImages(chatWith("https://img.example/slow"), { ...policy, deadlineMs: 50 }, io)).toMatchObject({ code: "remote_media_failed", refusal: expect.stringContaining("timed out") });
    const nxdomain: FetchIo = { ...io, lookup: async () => Promise.reject(new Error("ENOTFOUND")) };
    expect(await inlineRemoteImages(chatWith("https://nowhere.example/a.png"), policy, nxdomain)).toMatchObject({ refusal: expect.stringContaining("does not resolve") });
  });

  test("a URL over 200 characters is named by its first 200", async () => {
    const long = `http://10.0.0.1/${"a".repeat(400)}`;
    const out = (await inlineRemoteImages(chatWith(long), policy, network({}).io)) as { refusal: string };
    expect(out.refusal).toContain(`${long.slice(0, 200)}…`);
    expect(out.refusal).not.toContain(long.slice(0, 201));
  });

  test("a body with no image by URL, or with other media by URL beside one, is given back as it is, fetching nothing", async () => {
    const { io, asked } = network({ "https://img.example/a.png": png });
    const plain = { model: "m", messages: [{ role: "user", content: "hi" }] };
    expect((await inlineRemoteImages(plain, policy, io)) as { body: unknown }).toEqual({ body: plain });
    const withVideo = { model: "m", messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "https://img.example/a.png" } }, { type: "video_url", video_url: { url: "https://img.example/v.mp4" } }] }] };
    expect(((await inlineRemoteImages(withVideo, policy, io)) as { body: unknown }).body).toBe(withVideo);
    expect(asked).toEqual([]);
  });
});

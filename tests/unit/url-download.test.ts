import { afterAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PEER_SOURCE_RULE, type SourceRule } from "../../models/download-rules.ts";
import { TransferRefused, type TransferProgress } from "../../models/model-transfer.ts";
import { downloadFromUrl } from "../../models/url-download.ts";
import { partsIn, sha256, tempDirs } from "../../harness/transfer.ts";
import { waitFor } from "../../harness/wait.ts";

const dirs = tempDirs("mesh-transfer-");
afterAll(dirs.remove);
const freshDir = dirs.fresh;


// ---------- URL download ----------

interface Hit {
  path: string;
  range: string | null;
  status: number;
  auth: string | null;
}

/** A file server that honours Range, and can be told to cut bodies, ignore ranges, fail or send etags. */
function fileServer(files: Record<string, Uint8Array>) {
  const state = {
    hits: [] as Hit[],
    /** Cut this many of the next bodies after `cutAt` bytes of each. */
    cuts: 0,
    cutAt: 800_000,
    /** Answer 503 to this many of the next requests. */
    failures: 0,
    /** After the next cut, answer 503 to everything (the server went down). */
    downAfterCut: false,
    ignoreRange: false,
    etag: undefined as string | undefined,
    /** `/resolve/<name>` redirects here with `x-linked-etag`. */
    redirectTo: undefined as string | undefined,
    linkedEtag: undefined as string | undefined,
  };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const url = new URL(req.url);
      const hit = (status: number) => state.hits.push({ path: url.pathname, range: req.headers.get("range"), status, auth: req.headers.get("authorization") });
      if (url.pathname.startsWith("/resolve/")) {
        hit(302);
        const headers: Record<string, string> = { location: `${state.redirectTo}/files/${url.pathname.slice("/resolve/".length)}` };
        if (state.linkedEtag) headers["x-linked-etag"] = `"${state.linkedEtag}"`;
        return new Response(null, { status: 302, headers });
      }
      if (state.failures > 0) {
        state.failures--;
        hit(503);
        return new Response("busy", { status: 503 });
      }
      const data = files[url.pathname.slice("/files/".length)];
      if (!data) {
        hit(404);
        return new Response("no", { status: 404 });
      }
      const headers: Record<string, string> = {};
      if (state.etag) headers.etag = `"${state.etag}"`;
      let start = 0;
      let status = 200;
      const range = /^bytes=(\d+)-$/.exec(req.headers.get("range") ?? "");
      if (range && !state.ignoreRange) {
        start = Number(range[1]);
        if (start >= data.length) {
          hit(416);
          return new Response(null, { status: 416, headers: { ...headers, "content-range": `bytes */${data.length}` } });
        }
        status = 206;
        headers["content-range"] = `bytes ${start}-${data.length - 1}/${data.length}`;
      }
      hit(status);
      const body = data.subarray(start);
      headers["content-length"] = String(body.length);
      if (state.cuts <= 0) return new Response(body, { status, headers });
      state.cuts--;
      if (state.downAfterCut) state.failures = Infinity;
      let sent = false;
      const cutAt = state.cutAt;
      return new Response(
        new ReadableStream({
          // Failing the body drops the connection (an error with no reason keeps the log quiet) after a
          // pause; what arrives first is the kernel's (a reset drops what was unread), so tests ask for no fixed byte.
          async pull(controller) {
            if (sent) {
              await Bun.sleep(200);
              return controller.error();
            }
            sent = true;
            controller.enqueue(body.subarray(0, cutAt));
          },
        }),
        { status, headers },
      );
    },
  });
  return { state, base: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) };
}

describe("downloadFromUrl", () => {
  // A model: GGUF's magic, then anything.
  const data = Buffer.concat([Buffer.from("GGUF"), randomBytes(2_500_000 - 4)]);
  const files = { "model.gguf": data, "Orig-Q4-00002-of-00003.gguf": data.subarray(0, 1000) };
  const hub = fileServer(files);
  const cdn = fileServer(files);
  afterAll(() => {
    hub.stop();
    cdn.stop();
  });
  const reset = () => {
    for (const s of [hub.state, cdn.state]) Object.assign(s, { hits: [], cuts: 0, failures: 0, downAfterCut: false, ignoreRange: false, etag: undefined, linkedEtag: undefined, redirectTo: cdn.base });
  };
  const download = (dest: string, over: Partial<Parameters<typeof downloadFromUrl>[0]> = {}) =>
    downloadFromUrl({ url: `${hub.base}/files/model.gguf`, model: "m", destDir: dest, retryDelayMs: 5, ...over });

  test("a whole file, not verified when nobody states a hash", async () => {
    reset();
    const dest = freshDir("url-full");
    const progress: TransferProgress[] = [];
    const got = await download(dest, { onProgress: (p) => progress.push(p) });
    expect(got).toEqual({ path: join(dest, "m.gguf"), sha256: sha256(data), verified: false });
    expect(Buffer.from(readFileSync(got.path)).equals(data)).toBe(true);
    expect(progress.at(-1)).toEqual({ model: "m", bytes: data.length, total: data.length });
    expect(partsIn(dest)).toEqual([]);
  });

  test("a given sha256 is checked", async () => {
    reset();
    const got = await download(freshDir("url-sha"), { sha256: sha256(data).toUpperCase() });
    expect(got.verified).toBe(true);
  });

  test("a cut body is resumed with a range (206) within the same call", async () => {
    reset();
    hub.state.cuts = 1;
    const dest = freshDir("url-resume");
    const got = await download(dest);
    expect(hub.state.hits.map((h) => h.status)).toEqual([200, 206]);
    const from = Number(/^bytes=(\d+)-$/.exec(hub.state.hits[1]!.range ?? "")?.[1]);
    expect(from).toBeGreaterThan(0);
    expect(from).toBeLessThanOrEqual(800_000);
    expect(Buffer.from(readFileSync(got.path)).equals(data)).toBe(true);
  });

  test("a failed download keeps its part, and the next call asks from the part's length", async () => {
    reset();
    hub.state.cuts = 1;
    hub.state.downAfterCut = true;
    const dest = freshDir("url-next-call");
    await expect(download(dest)).rejects.toThrow("failed 3 times in a row");
    expect(hub.state.hits.map((h) => h.status)).toEqual([200, 503, 503]);
    const partLength = statSync(join(dest, ".partial", "m.gguf.part")).size;
    expect(partLength).toBeGreaterThan(0);
    expect(partLength).toBeLessThanOrEqual(800_000);
    reset();
    const got = await download(dest);
    expect(hub.state.hits.map((h) => [h.status, h.range])).toEqual([[206, `bytes=${partLength}-`]]);
    expect(Buffer.from(readFileSync(got.path)).equals(data)).toBe(true);
  });

  test("a server that ignores the range (200) starts the file over", async () => {
    reset();
    const dest = freshDir("url-ignore-range");
    mkdirSync(join(dest, ".partial"));
    writeFileSync(join(dest, ".partial", "m.gguf.part"), randomBytes(600_000));
    hub.state.ignoreRange = true;
    const got = await download(dest, { sha256: sha256(data) });
    expect(hub.state.hits.map((h) => [h.status, h.range])).toEqual([[200, "bytes=600000-"]]);
    expect(Buffer.from(readFileSync(got.path)).equals(data)).toBe(true);
  });

  test("a wrong sha256 installs nothing and removes the part", async () => {
    reset();
    const dest = freshDir("url-wrong-sha");
    await expect(download(dest, { sha256: "ab".repeat(32) })).rejects.toThrow(`arrived with SHA-256 ${sha256(data)}, expected ${"ab".repeat(32)}`);
    expect(existsSync(join(dest, "m.gguf"))).toBe(false);
    expect(partsIn(dest)).toEqual([]);
  });

  test("an etag that is a sha256 verifies the file, and a wrong one fails it", async () => {
    reset();
    hub.state.etag = sha256(data);
    expect((await download(freshDir("url-etag"))).verified).toBe(true);
    hub.state.etag = "cd".repeat(32);
    await expect(download(freshDir("url-etag-wrong"))).rejects.toThrow("expected cdcd");
    // An etag that is no sha256 (an S3 md5) says nothing about the hash.
    hub.state.etag = "0123456789abcdef0123456789abcdef";
    expect((await download(freshDir("url-etag-md5"))).verified).toBe(false);
  });

  test("a hub redirect's x-linked-etag verifies; credentials stay with the hub", async () => {
    reset();
    hub.state.linkedEtag = sha256(data);
    const got = await download(freshDir("url-linked"), { url: `${hub.base}/resolve/model.gguf`, headers: { Authorization: "Bearer t" } });
    expect(got.verified).toBe(true);
    expect(hub.state.hits.map((h) => h.auth)).toEqual(["Bearer t"]);
    expect(cdn.state.hits.map((h) => [h.path, h.auth])).toEqual([["/files/model.gguf", null]]);
  });

  test("a 503 is tried again; a 404 is not", async () => {
    reset();
    hub.state.failures = 2;
    expect((await download(freshDir("url-503"))).sha256).toBe(sha256(data));
    expect(hub.state.hits.map((h) => h.status)).toEqual([503, 503, 200]);
    reset();
    await expect(download(freshDir("url-404"), { url: `${hub.base}/files/nope.gguf` })).rejects.toThrow("answered 404: no such file");
    expect(hub.state.hits).toHaveLength(1);
  });

  test("a complete part from a run that stopped before the rename is installed (416)", async () => {
    reset();
    const dest = freshDir("url-416");
    mkdirSync(join(dest, ".partial"));
    writeFileSync(join(dest, ".partial", "m.gguf.part"), data);
    const got = await download(dest, { sha256: sha256(data) });
    expect(hub.state.hits.map((h) => h.status)).toEqual([416]);
    expect(got.verified).toBe(true);
  });

  test("a shard keeps its suffix under the model's name", async () => {
    reset();
    const got = await download(freshDir("url-shard"), { url: `${hub.base}/files/Orig-Q4-00002-of-00003.gguf`, model: "big" });
    expect(got.path.endsWith("/big-00002-of-00003.gguf")).toBe(true);
  });
});

// ---------- a hostile source (issue 12, holes 5 and 6) ----------

/**
 * A server of `total` bytes (the first four `head`, then zeros): with a Content-Length, or streamed
 * in 64 KiB chunks as the client reads them, counting what it handed over. `/to/<url>` redirects
 * to that URL. It records every request's Host header.
 */
function streamServer() {
  const state = { total: 32 * 2 ** 20, head: "GGUF", stateLength: true, sent: 0, closed: false, hosts: [] as string[], onRequest: () => {} };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const url = new URL(req.url);
      state.hosts.push(req.headers.get("host") ?? "");
      state.onRequest();
      if (url.pathname.startsWith("/to/")) return new Response(null, { status: 302, headers: { location: decodeURIComponent(url.pathname.slice(4)) } });
      if (state.stateLength) {
        // A whole body, so the length is stated (a stream would go chunked).
        const bytes = new Uint8Array(state.total);
        bytes.set(new TextEncoder().encode(state.head));
        state.sent += bytes.length;
        return new Response(bytes);
      }
      const chunk = 64 * 1024;
      let at = 0;
      const body = new ReadableStream({
        pull(controller) {
          if (at >= state.total) return controller.close();
          const bytes = new Uint8Array(Math.min(chunk, state.total - at));
          if (at === 0) bytes.set(new TextEncoder().encode(state.head));
          at += bytes.length;
          state.sent += bytes.length;
          controller.enqueue(bytes);
        },
        cancel() {
          state.closed = true;
        },
      });
      return new Response(body);
    },
  });
  return { state, port: server.port ?? 0, base: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) };
}

describe("downloadFromUrl against a hostile source", () => {
  const src = streamServer();
  afterAll(() => src.stop());
  const reset = (over: Partial<typeof src.state> = {}) => Object.assign(src.state, { total: 32 * 2 ** 20, head: "GGUF", stateLength: true, sent: 0, closed: false, hosts: [], onRequest: () => {} }, over);
  /** Loopback stands in for the public internet: only 127.0.0.1 counts as public, and http is allowed. */
  const testRule: SourceRule = { who: "a test source", schemes: ["http:"], allowsAddress: (a) => a === "127.0.0.1" };
  const names: Record<string, string[]> = { "public.test": ["127.0.0.1"], "private.test": ["10.1.2.3"], "both.test": ["127.0.0.1", "::1"] };
  const lookups: string[] = [];
  const resolve = async (host: string) => {
    lookups.push(host);
    return names[host] ?? [];
  };
  const get = (dest: string, url: string, over: Partial<Parameters<typeof downloadFromUrl>[0]> = {}) =>
    downloadFromUrl({ url, model: "m", destDir: dest, retryDelayMs: 5, rule: testRule, resolve, ...over });

  test("the connection goes to the address checked, with the name in Host (so DNS asked again cannot rebind it)", async () => {
    reset({ total: 100_000 });
    lookups.length = 0;
    // public.test exists only in the test's resolver: the request can reach the server only through the pinned address.
    const got = await get(freshDir("pinned"), `http://public.test:${src.port}/m.gguf`);
    expect(statSync(got.path).size).toBe(100_000);
    expect(src.state.hosts).toEqual([`public.test:${src.port}`]);
    expect(lookups).toEqual(["public.test"]);
  });

  test.each([
    ["a private address", "private.test", "private.test resolves to 10.1.2.3, not a public address"],
    ["a name with one bad address among good ones", "both.test", "both.test resolves to ::1, not a public address"],
    ["an unknown name", "nowhere.test", "nowhere.test resolves to no address"],
  ])("a redirect to %s is refused before it is followed", async (_, host, why) => {
    reset();
    const dest = freshDir("redirect");
    const target = encodeURIComponent(`http://${host}:${src.port}/m.gguf`);
    const err = await get(dest, `http://public.test:${src.port}/to/${target}`).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransferRefused);
    expect((err as Error).message).toContain(why);
    // The first hop only: the redirect's target was never asked.
    expect(src.state.hosts).toEqual([`public.test:${src.port}`]);
    expect(src.state.sent).toBe(0);
    expect(partsIn(dest)).toEqual([]);
  });

  test.each([
    ["file:", (dir: string) => `file://${join(dir, "secret")}`],
    ["data:", () => "data:application/octet-stream;base64,R0dVRgAAAAA="],
  ])("a redirect to %s is refused whoever chose the URL (an operator's own pull too)", async (_, target) => {
    reset();
    const dest = freshDir("redirect-scheme");
    const secrets = freshDir("secrets");
    writeFileSync(join(secrets, "secret"), "GGUF a 0600 secret", { mode: 0o600 });
    const err = await downloadFromUrl({ url: `${src.base}/to/${encodeURIComponent(target(secrets))}`, model: "m", destDir: dest, retryDelayMs: 5 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransferRefused);
    expect((err as Error).message).toContain("only http and https URLs can be downloaded");
    expect(readdirSync(dest).filter((f) => !f.startsWith("."))).toEqual([]);
    expect(partsIn(dest)).toEqual([]);
  });

  test.each([
    ["http", (port: number) => `http://127.0.0.1:${port}/m.gguf`, "http is not allowed (https only)"],
    ["https to 127.0.0.1", (port: number) => `https://127.0.0.1:${port}/m.gguf`, "127.0.0.1 is not a public address"],
    ["https to localhost", (port: number) => `https://localhost:${port}/m.gguf`, "localhost resolves to"],
    ["https to IPv4-mapped loopback", (port: number) => `https://[::ffff:127.0.0.1]:${port}/m.gguf`, "::ffff:7f00:1 is not a public address"],
    ["https to 127.0.0.1 as a number", (port: number) => `https://2130706433:${port}/m.gguf`, "127.0.0.1 is not a public address"],
  ])("under the peer rule, %s is refused without a request", async (_, url, why) => {
    reset();
    const err = await downloadFromUrl({ url: url(src.port), model: "m", destDir: freshDir("peer-rule"), rule: PEER_SOURCE_RULE }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransferRefused);
    expect((err as Error).message).toContain(why);
    expect(src.state.hosts).toEqual([]);
  });

  test("a body longer than the cap is cut the moment it passes it, and removed", async () => {
    reset({ stateLength: false, total: 256 * 2 ** 20 });
    const dest = freshDir("cap");
    const limit = { maxBytes: 1_000_000, requireLength: false, why: "the 1000000 bytes the mesh announced for it" };
    let most = 0;
    const onProgress = (p: TransferProgress) => (most = Math.max(most, p.bytes));
    await expect(get(dest, `http://public.test:${src.port}/m.gguf`, { limit, onProgress })).rejects.toThrow("sent more than the 1000000 bytes the mesh announced for it");
    expect(most).toBeLessThanOrEqual(1_000_000);
    expect(partsIn(dest)).toEqual([]);
    expect(existsSync(join(dest, "m.gguf"))).toBe(false);
    // The connection closed there: the server handed over what buffers hold, not the 256 MiB it had.
    await waitFor(() => src.state.closed, { what: "the server to see the download hang up" });
    expect(src.state.sent).toBeLessThan(32 * 2 ** 20);
  });

  test("a stated length above the cap, or none where one is required, is refused before the body", async () => {
    reset({ total: 5_000_000 });
    const limit = { maxBytes: 1_000_000, requireLength: false, why: "the 1000000 bytes the mesh announced for it" };
    await expect(get(freshDir("cap-stated"), `http://public.test:${src.port}/m.gguf`, { limit })).rejects.toThrow("states 5000000 bytes, more than the 1000000 bytes");
    reset({ stateLength: false });
    const seedLimit = { maxBytes: 10 * 2 ** 30, requireLength: true, why: "the free space" };
    const err = await get(freshDir("cap-unstated"), `http://public.test:${src.port}/m.gguf`, { limit: seedLimit }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransferRefused);
    expect((err as Error).message).toContain("states no length");
  });

  test("a file that does not start with GGUF is stopped at its first chunk, from the operator's own source too", async () => {
    reset({ head: "<htm", stateLength: false, total: 256 * 2 ** 20 });
    const dest = freshDir("magic");
    await expect(downloadFromUrl({ url: `${src.base}/m.gguf`, model: "m", destDir: dest })).rejects.toThrow('is not a GGUF model file (it does not start with "GGUF")');
    expect(existsSync(join(dest, "m.gguf"))).toBe(false);
    expect(partsIn(dest)).toEqual([]);
    await waitFor(() => src.state.closed, { what: "the server to see the download hang up" });
    expect(src.state.sent).toBeLessThan(32 * 2 ** 20);
  });

  test("a file already under the arriving name (models.json maps it to another model) is refused, and keeps its bytes", async () => {
    reset({ total: 100_000 });
    const dest = freshDir("taken");
    const mine = Buffer.from("GGUF the operator's other model");
    writeFileSync(join(dest, "x.gguf"), mine);
    writeFileSync(join(dest, "models.json"), JSON.stringify({ other: { file: "x.gguf" } }));
    const err = await downloadFromUrl({ url: `${src.base}/x.gguf`, model: "x", destDir: dest }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransferRefused);
    expect((err as Error).message).toContain("x.gguf already exists");
    expect(readFileSync(join(dest, "x.gguf")).equals(mine)).toBe(true);
    expect(src.state.hosts).toEqual([]);
  });

  test("a file that appears under the name while the download runs is not replaced either", async () => {
    const dest = freshDir("taken-late");
    const mine = Buffer.from("GGUF copied in meanwhile");
    reset({ total: 100_000, onRequest: () => writeFileSync(join(dest, "x.gguf"), mine) });
    await expect(downloadFromUrl({ url: `${src.base}/x.gguf`, model: "x", destDir: dest })).rejects.toThrow("x.gguf already exists");
    expect(readFileSync(join(dest, "x.gguf")).equals(mine)).toBe(true);
  });

  test("an archive (a file named by the caller) may replace its own earlier copy", async () => {
    reset({ total: 1000, head: "PK\x03\x04" });
    const dest = freshDir("archive");
    writeFileSync(join(dest, "llama.zip"), "an earlier, broken copy");
    const got = await downloadFromUrl({ url: `${src.base}/llama.zip`, model: "llama.zip", fileName: "llama.zip", destDir: dest });
    expect(statSync(got.path).size).toBe(1000);
  });
});

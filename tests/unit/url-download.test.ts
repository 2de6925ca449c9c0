import { afterAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type TransferProgress } from "../../models/model-transfer.ts";
import { downloadFromUrl } from "../../models/url-download.ts";
import { partsIn, sha256, tempDirs } from "../helpers/transfer.ts";

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
          // Failing the body drops the connection (an error with no reason keeps the log quiet); the
          // pause lets the client take the first part first, so the cut lands at a known byte.
          async pull(controller) {
            if (sent) {
              await Bun.sleep(20);
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
  const data = randomBytes(2_500_000);
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
    expect(hub.state.hits.map((h) => [h.status, h.range])).toEqual([
      [200, null],
      [206, "bytes=800000-"],
    ]);
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
    expect(partLength).toBe(800_000);
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

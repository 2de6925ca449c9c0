/**
 * llama.cpp on first run, against a local server that mimics GitHub's releases API and serves a
 * real archive made from our own built binaries: download, verify, extract, serve a model; the
 * cache used with the server gone; a wrong digest, a cut download, a missing asset, two nodes at once.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { copyFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tar from "tar";
import { chat } from "../../harness/api.ts";
import { killAllChildren, spawnChild } from "../../harness/children.ts";
import { devLlama } from "../../harness/llama.ts";
import { testModel } from "../../harness/models.ts";
import { meshCommand, SMALL_LLAMA, startNode, type TestNode } from "../../harness/node.ts";

const TAG = "b9999";
const ASSET = `llama-${TAG}-bin-ubuntu-x64.tar.gz`;
const work = mkdtempSync(join(tmpdir(), "mesh-llama-release-test-"));
let archive: Uint8Array;
let sha256: string;

/** What the fake releases server does, per test. */
const behave = { digest: "", assets: [ASSET], cutFirstAt: 0 };
const seen: { path: string; range: string | null }[] = [];
let server: ReturnType<typeof Bun.serve> | undefined;
/** The API base of the last server started (a node keeps it as its mirror after the server is gone). */
let base = "";
const api = () => base;

function serve() {
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const url = new URL(req.url);
      seen.push({ path: url.pathname, range: req.headers.get("range") });
      if (url.pathname === `/repos/ggml-org/llama.cpp/releases/tags/${TAG}`) {
        return Response.json({
          tag_name: TAG,
          assets: behave.assets.map((name) => ({ name, browser_download_url: `${api()}/download/${name}`, size: archive.length, digest: `sha256:${behave.digest}` })),
        });
      }
      if (url.pathname !== `/download/${ASSET}`) return new Response("not found", { status: 404 });
      const from = Number(/^bytes=(\d+)-$/.exec(req.headers.get("range") ?? "")?.[1] ?? 0);
      const body = archive.subarray(from);
      const headers = { "content-length": String(body.length), ...(from ? { "content-range": `bytes ${from}-${archive.length - 1}/${archive.length}` } : {}) };
      if (behave.cutFirstAt && !from) {
        // The connection breaks part-way through the first try.
        const cut = behave.cutFirstAt;
        behave.cutFirstAt = 0;
        const stream = new ReadableStream({
          start(c) {
            c.enqueue(body.subarray(0, cut));
            setTimeout(() => c.error(new Error("cut")), 50);
          },
        });
        return new Response(stream, { status: 200, headers });
      }
      return new Response(body, { status: from ? 206 : 200, headers });
    },
  });
  base = `http://127.0.0.1:${server.port}`;
}

beforeAll(async () => {
  // The archive as upstream lays it out: a versioned top folder, the RPC server as `rpc-server`.
  const top = join(work, "pack", `llama-${TAG}`);
  mkdirSync(top, { recursive: true });
  await copyFile(devLlama().llamaServer, join(top, "llama-server"));
  await copyFile(devLlama().rpcServer, join(top, "rpc-server"));
  const file = join(work, ASSET);
  await tar.create({ gzip: true, file, cwd: join(work, "pack"), portable: true }, [`llama-${TAG}`]);
  archive = new Uint8Array(readFileSync(file));
  sha256 = new Bun.CryptoHasher("sha256").update(archive).digest("hex");
  behave.digest = sha256;
});

const nodes: TestNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
  server?.stop(true);
  server = undefined;
  seen.length = 0;
  Object.assign(behave, { digest: sha256, assets: [ASSET], cutFirstAt: 0 });
});
afterAll(async () => {
  await killAllChildren();
  rmSync(work, { recursive: true, force: true });
});

const freshCache = () => mkdtempSync(join(work, "xdg-"));
const installDir = (cache: string) => join(cache, "mesh", "llama.cpp", `${TAG}-cpu`);
const llamaFlags = () => ["--llama-release", TAG, "--llama-flavor", "cpu", "--llama-mirror", api()];
/** A node with no MESH_LLAMA_DIR, so it must find llama.cpp by itself. */
const startFresh = async (cache: string) => {
  const tiny = await testModel("tiny", "q8_0");
  const n = await startNode([...SMALL_LLAMA, ...llamaFlags()], { env: { MESH_LLAMA_DIR: "", XDG_CACHE_HOME: cache }, models: { "tiny.gguf": tiny } });
  nodes.push(n);
  return n;
};
/** A node expected to fail before it listens: its exit code and output. */
async function failing(cache: string): Promise<{ code: number | null; output: string }> {
  const child = spawnChild("mesh", [...meshCommand(), "--port", "0", "--state-dir", join(cache, "state"), "--quic-bind", "127.0.0.1:0", "--relay", "disabled", ...llamaFlags()], { env: { MESH_LLAMA_DIR: "", XDG_CACHE_HOME: cache } });
  const code = await child.proc.exited;
  return { code, output: child.output() };
}

test("first run downloads, verifies, extracts and serves a model; the second uses the cache with the server gone", async () => {
  serve();
  const cache = freshCache();
  const first = await startFresh(cache);
  expect((await chat(first, "tiny", 2)).status).toBe(200);
  expect(seen.map((s) => s.path)).toEqual([`/repos/ggml-org/llama.cpp/releases/tags/${TAG}`, `/download/${ASSET}`]);
  expect(JSON.parse(readFileSync(join(installDir(cache), "mesh-install.json"), "utf8"))).toMatchObject({ tag: TAG, flavor: "cpu", sha256 });
  await first.stop();
  nodes.length = 0;

  server!.stop(true);
  server = undefined;
  const second = await startFresh(cache);
  expect((await chat(second, "tiny", 2)).status).toBe(200);
});

test("a wrong digest installs nothing and says so; the node does not start", async () => {
  serve();
  behave.digest = "0".repeat(64);
  const cache = freshCache();
  const { code, output } = await failing(cache);
  expect(code).toBe(1);
  expect(output).toContain(`expected ${"0".repeat(64)}`);
  expect(output).toContain("nothing was installed");
  expect(output).toContain("--llama-dir");
  expect(output).not.toContain("listening");
  expect(existsSync(installDir(cache))).toBe(false);
});

test("a download cut in the middle resumes from where it stopped", async () => {
  serve();
  behave.cutFirstAt = Math.floor(archive.length / 2);
  const cache = freshCache();
  const n = await startFresh(cache);
  expect((await chat(n, "tiny", 2)).status).toBe(200);
  const downloads = seen.filter((s) => s.path.startsWith("/download/"));
  expect(downloads.length).toBe(2);
  const resumedAt = Number(/bytes=(\d+)-/.exec(downloads[1]!.range ?? "")?.[1]);
  expect(resumedAt).toBeGreaterThan(0);
  expect(resumedAt).toBeLessThanOrEqual(Math.floor(archive.length / 2));
});

test("no asset for this platform: a clear error that says what to do", async () => {
  serve();
  behave.assets = [`llama-${TAG}-bin-macos-arm64.tar.gz`];
  const { code, output } = await failing(freshCache());
  expect(code).toBe(1);
  expect(output).toContain(`has no cpu build for linux-x64`);
  expect(output).toContain("mesh llama build");
});

test("two nodes starting at once end with one good install", async () => {
  serve();
  const cache = freshCache();
  const [a, b] = await Promise.all([startFresh(cache), startFresh(cache)]);
  expect((await chat(a, "tiny", 2)).status).toBe(200);
  expect((await chat(b, "tiny", 2)).status).toBe(200);
  expect(seen.filter((s) => s.path.startsWith("/download/")).length).toBe(1);
  expect(existsSync(join(installDir(cache), "llama-server"))).toBe(true);
});

/**
 * pullModel against a fake Hugging Face Hub on loopback that serves real test GGUFs: the tree
 * API with LFS SHA-256s (paged), `resolve` redirecting to a CDN on another origin, Range resume
 * after a cut, a stopped pull resumed by the next one, gated and private repos with and without
 * HF_TOKEN, a wrong SHA-256, a split model that the real llama-server loads from its first shard,
 * a model with a projector, a missing quant, a missing repo and a disk too small, each leaving
 * nothing half-installed.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { hubConfigFromEnv, type HubConfig } from "../../models/hf-hub.ts";
import { pullModel, PullError, type PullErrorCode, type PullOptions, type PullProgress } from "../../models/pull.ts";
import { readRegistry } from "../../models/registry.ts";
import { makeTestModel, splitShardPaths } from "../../scripts/make-test-model.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startFakeHub, type FakeHub } from "../../harness/fake-hub.ts";
import { startLlamaServer } from "../../harness/llama.ts";
import { testModel, testProjector } from "../../harness/models.ts";
import { gradientPng, pngDataUrl } from "../../harness/png.ts";
import { imageTokens, projectorShape } from "../../scripts/test-model/projector.ts";
import { presetShape } from "../../scripts/test-model/presets.ts";
import { sha256, tempDirs } from "../../harness/transfer.ts";
import { waitFor } from "../../harness/wait.ts";

const dirs = tempDirs("mesh-hub-pull-");
let hub: FakeHub;
let noToken: HubConfig;
let withToken: HubConfig;
const ORG = "test-org";

afterAll(async () => {
  await killAllChildren();
  await hub?.stop();
  dirs.remove();
});

beforeAll(async () => {
  const q8 = await testModel("tiny", "q8_0");
  const f32 = await testModel("tiny", "f32");
  const vision = await testModel("vision", "q8_0");
  const projector = testProjector(vision);
  const splitOut = join(dirs.fresh("split-model"), "Tiny-Q8_0.gguf");
  await makeTestModel({ preset: "tiny", type: "q8_0", split: 3, out: splitOut });
  const shards = splitShardPaths(splitOut, 3);
  const readme = new TextEncoder().encode("# a test repo\n");
  hub = await startFakeHub({
    // Small pages, so every listing here takes the Link header to its next page.
    pageSize: 2,
    repos: [
      { repo: `${ORG}/Tiny-GGUF`, files: { "README.md": readme, "Tiny-Q8_0.gguf": { fromFile: q8 }, "Tiny-F32.gguf": { fromFile: f32 } } },
      { repo: `${ORG}/Cut-GGUF`, files: { "Cut-Q8_0.gguf": { fromFile: q8 } } },
      { repo: `${ORG}/Stop-GGUF`, files: { "Stop-Q8_0.gguf": { fromFile: f32 } } },
      { repo: `${ORG}/Gated-GGUF`, gated: true, files: { "Gated-Q8_0.gguf": { fromFile: q8 } } },
      { repo: `${ORG}/Private-GGUF`, private: true, files: { "Private-Q8_0.gguf": { fromFile: q8 } } },
      { repo: `${ORG}/Bad-GGUF`, files: { "Bad-Q8_0.gguf": { fromFile: q8 } } },
      {
        repo: `${ORG}/Split-GGUF`,
        files: Object.fromEntries(shards.map((p, i) => [`Q8_0/Tiny-Q8_0-0000${i + 1}-of-00003.gguf`, { fromFile: p }])),
      },
      {
        repo: `${ORG}/Vision-GGUF`,
        files: { "Vision-Q8_0.gguf": { fromFile: vision }, "mmproj-Vision-F16.gguf": { fromFile: projector }, "mmproj-Vision-F32.gguf": { fromFile: projector } },
      },
      { repo: `${ORG}/Huge-GGUF`, files: { "Huge-Q4_K_M.gguf": { fromFile: q8, claimSize: 1e15 } } },
    ],
  });
  const home = dirs.fresh("home");
  noToken = hubConfigFromEnv({ HF_ENDPOINT: hub.endpoint }, home);
  withToken = hubConfigFromEnv({ HF_ENDPOINT: hub.endpoint, HF_TOKEN: hub.token }, home);
  expect(noToken.token).toBeUndefined();
}, 120_000);

const pull = (ref: string, over: Partial<PullOptions> = {}) => pullModel({ ref, modelsDir: over.modelsDir ?? dirs.fresh("models"), hub: noToken, ...over });

async function pullError(p: Promise<unknown>, code: PullErrorCode): Promise<PullError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(PullError);
  expect((err as PullError).code).toBe(code);
  return err as PullError;
}

/** Every file under `dir`, relative, dot folders included. */
function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort();
}
const installed = (modelsDir: string) => filesUnder(modelsDir).filter((f) => !f.startsWith(".pulls"));
const fileBytes = (path: string) => new Uint8Array(readFileSync(path));

describe("pulling from the Hub", () => {
  test("org/repo: the tree's LFS SHA-256, resolve redirected to the CDN, installed under hf/, registered; a second pull has it", async () => {
    const modelsDir = dirs.fresh("models");
    const progress: PullProgress[] = [];
    const before = hub.requests.length;
    const got = await pull(`${ORG}/Tiny-GGUF`, { modelsDir, hub: withToken, onProgress: (p) => progress.push(p) });

    // No Q4_K_M there: the smallest of at least Q4_0 is Q8_0 (F32 is larger).
    const expectedPath = join(modelsDir, "hf", ORG, "Tiny-GGUF", "Tiny-Q8_0.gguf");
    expect(got).toEqual({
      name: `${ORG}/Tiny-GGUF`,
      ref: `${ORG}/Tiny-GGUF/Tiny-Q8_0.gguf`,
      path: expectedPath,
      files: [expectedPath],
      mmproj: undefined,
      sizeBytes: statSync(expectedPath).size,
      alreadyHad: false,
    });
    expect(sha256(fileBytes(expectedPath))).toBe(hub.sha256(`${ORG}/Tiny-GGUF`, "Tiny-Q8_0.gguf"));
    expect(readRegistry(join(modelsDir, "models.json"))[`${ORG}/Tiny-GGUF`]).toMatchObject({
      file: `hf/${ORG}/Tiny-GGUF/Tiny-Q8_0.gguf`,
      ref: `${ORG}/Tiny-GGUF/Tiny-Q8_0.gguf`,
      pulled: true,
    });
    expect(installed(modelsDir)).toEqual([`hf/${ORG}/Tiny-GGUF/Tiny-Q8_0.gguf`, "models.json"]);
    // Staging is cleaned up: no part, no staged file left.
    expect(filesUnder(join(modelsDir, ".pulls")).filter((f) => f.endsWith(".gguf") || f.endsWith(".part"))).toEqual([]);

    const seen = hub.requests.slice(before);
    const trees = seen.filter((r) => r.path.startsWith(`/api/models/${ORG}/Tiny-GGUF/tree/main`));
    expect(trees.length).toBe(2); // 3 entries, 2 per page
    expect(trees[1]!.path).toContain("cursor=2");
    // The token goes to the Hub only, never to the CDN it redirects to.
    expect(seen.filter((r) => r.server === "hub").every((r) => r.authorization === `Bearer ${hub.token}`)).toBe(true);
    const cdn = seen.filter((r) => r.server === "cdn");
    expect(cdn.length).toBe(1);
    expect(cdn[0]!.authorization).toBeNull();
    expect(hub.downloads(`${ORG}/Tiny-GGUF`, "Tiny-Q8_0.gguf")).toBe(1);

    const last = progress.at(-1)!;
    expect(last).toMatchObject({ file: "Tiny-Q8_0.gguf", fileIndex: 1, fileCount: 1, bytes: got.sizeBytes, total: got.sizeBytes, allBytes: got.sizeBytes, allTotal: got.sizeBytes });

    const again = await pull(`${ORG}/Tiny-GGUF`, { modelsDir });
    expect(again).toEqual({ ...got, alreadyHad: true });
    expect(hub.downloads(`${ORG}/Tiny-GGUF`, "Tiny-Q8_0.gguf")).toBe(1);

    // The same file under another name: checked against its hash, not fetched again.
    const alias = await pull(`${ORG}/Tiny-GGUF:Q8_0`, { modelsDir, name: "tiny-alias" });
    expect(alias).toMatchObject({ name: "tiny-alias", path: expectedPath, alreadyHad: false });
    expect(hub.downloads(`${ORG}/Tiny-GGUF`, "Tiny-Q8_0.gguf")).toBe(1);

    // Another quant of the same repo, by the typed reference as its name.
    const f32 = await pull(`hf.co/${ORG}/Tiny-GGUF:f32`, { modelsDir });
    expect(f32.name).toBe(`hf.co/${ORG}/Tiny-GGUF:f32`);
    expect(f32.path).toBe(join(modelsDir, "hf", ORG, "Tiny-GGUF", "Tiny-F32.gguf"));
    expect(new Set(Object.keys(readRegistry(join(modelsDir, "models.json"))))).toEqual(new Set([`${ORG}/Tiny-GGUF`, "tiny-alias", `hf.co/${ORG}/Tiny-GGUF:f32`]));
  });

  test("a transfer cut mid-file resumes with Range and is one download", async () => {
    const repo = `${ORG}/Cut-GGUF`;
    hub.cutNext(repo, "Cut-Q8_0.gguf", 100_000);
    const modelsDir = dirs.fresh("models");
    const got = await pull(`${repo}:Q8_0`, { modelsDir });
    expect(sha256(fileBytes(got.path))).toBe(hub.sha256(repo, "Cut-Q8_0.gguf"));
    const hits = hub.cdnRequests(repo, "Cut-Q8_0.gguf");
    expect(hits.map((h) => h.range === null)).toEqual([true, false]);
    const resumedAt = Number(/^bytes=(\d+)-$/.exec(hits[1]!.range!)![1]);
    expect(resumedAt).toBeGreaterThan(0);
    expect(resumedAt).toBeLessThanOrEqual(100_000);
    expect(hub.downloads(repo, "Cut-Q8_0.gguf")).toBe(1);
  });

  test("a stopped pull installs nothing and keeps its part; the next pull resumes from it", async () => {
    const repo = `${ORG}/Stop-GGUF`;
    const modelsDir = dirs.fresh("models");
    hub.cutNext(repo, "Stop-Q8_0.gguf", 300_000, { hold: true });
    const stop = new AbortController();
    const running = pull(repo, { modelsDir, signal: stop.signal });
    const parts = () => filesUnder(join(modelsDir, ".pulls")).filter((f) => f.endsWith(".part"));
    await waitFor(() => parts().length === 1 && statSync(join(modelsDir, ".pulls", parts()[0]!)).size >= 300_000, { what: "the first 300000 bytes to arrive" });
    stop.abort();
    const err = await pullError(running, "download_failed");
    expect(err.message).toContain("resumes");
    hub.release();
    expect(installed(modelsDir)).toEqual([]);
    expect(parts().length).toBe(1);

    const got = await pull(repo, { modelsDir });
    expect(sha256(fileBytes(got.path))).toBe(hub.sha256(repo, "Stop-Q8_0.gguf"));
    expect(hub.cdnRequests(repo, "Stop-Q8_0.gguf").at(-1)!.range).toBe("bytes=300000-");
    expect(hub.downloads(repo, "Stop-Q8_0.gguf")).toBe(1);
    expect(parts()).toEqual([]);
  });

  test("a gated repo: 401 without a token says how to give one; HF_TOKEN pulls it; the CDN never sees the token", async () => {
    const repo = `${ORG}/Gated-GGUF`;
    const modelsDir = dirs.fresh("models");
    const err = await pullError(pull(repo, { modelsDir }), "gated");
    expect(err.message).toContain("gated or private");
    expect(err.message).toContain("HF_TOKEN");
    expect(err.message).toContain("huggingface-cli login");
    expect(installed(modelsDir)).toEqual([]);
    expect(hub.downloads(repo, "Gated-Q8_0.gguf")).toBe(0);

    const wrong = await pullError(pull(repo, { modelsDir, hub: { ...withToken, token: "hf_wrong" } }), "gated");
    expect(wrong.message).toContain("no access");

    const got = await pull(repo, { modelsDir, hub: withToken });
    expect(sha256(fileBytes(got.path))).toBe(hub.sha256(repo, "Gated-Q8_0.gguf"));
    expect(hub.cdnRequests(repo, "Gated-Q8_0.gguf").every((h) => h.authorization === null)).toBe(true);
  });

  test("a private repo reads as missing without a token, and pulls with one", async () => {
    const repo = `${ORG}/Private-GGUF`;
    const err = await pullError(pull(repo), "not_found");
    expect(err.message).toContain("HF_TOKEN");
    const got = await pull(repo, { hub: withToken });
    expect(got.name).toBe(repo);
  });

  test("a missing repo is not found, by the Hub's own error code", async () => {
    const err = await pullError(pull(`${ORG}/No-Such-GGUF`, { hub: withToken }), "not_found");
    expect(err.message).toContain(`no repository ${ORG}/No-Such-GGUF`);
  });

  test("a wrong SHA-256: nothing installed, models.json untouched, the next pull starts over", async () => {
    const repo = `${ORG}/Bad-GGUF`;
    const modelsDir = dirs.fresh("models");
    const registry = `${JSON.stringify({ mine: { file: "mine.gguf", labels: ["x"] } }, null, 4)}\n`;
    writeFileSync(join(modelsDir, "models.json"), registry);
    hub.corrupt(repo, "Bad-Q8_0.gguf");
    const err = await pullError(pull(repo, { modelsDir }), "hash_mismatch");
    expect(err.message).toContain(hub.sha256(repo, "Bad-Q8_0.gguf"));
    expect(err.message).toContain("nothing was installed");
    expect(installed(modelsDir)).toEqual(["models.json"]);
    expect(readFileSync(join(modelsDir, "models.json"), "utf8")).toBe(registry);
    expect(filesUnder(join(modelsDir, ".pulls")).filter((f) => f.endsWith(".part") || f.endsWith(".gguf"))).toEqual([]);

    hub.corrupt(repo, "Bad-Q8_0.gguf", false);
    const got = await pull(repo, { modelsDir });
    expect(sha256(fileBytes(got.path))).toBe(hub.sha256(repo, "Bad-Q8_0.gguf"));
    // The operator's entry is kept as it was written, defaults not filled in.
    const after = JSON.parse(readFileSync(join(modelsDir, "models.json"), "utf8"));
    expect(after.mine).toEqual({ file: "mine.gguf", labels: ["x"] });
  });

  test("a split model comes whole, the first shard installed last, and llama-server loads it from its first shard", async () => {
    const repo = `${ORG}/Split-GGUF`;
    const modelsDir = dirs.fresh("models");
    const progress: PullProgress[] = [];
    const got = await pull(`${repo}:Q8_0`, { modelsDir, onProgress: (p) => progress.push(p) });
    const dir = join(modelsDir, "hf", ORG, "Split-GGUF", "Q8_0");
    const shards = [1, 2, 3].map((i) => join(dir, `Tiny-Q8_0-0000${i}-of-00003.gguf`));
    expect(got.path).toBe(shards[0]!);
    expect(got.files).toEqual(shards);
    for (const [i, s] of shards.entries()) expect(sha256(fileBytes(s))).toBe(hub.sha256(repo, `Q8_0/Tiny-Q8_0-0000${i + 1}-of-00003.gguf`));
    expect(got.ref).toBe(`${repo}/Q8_0/Tiny-Q8_0-00001-of-00003.gguf`);
    expect(readRegistry(join(modelsDir, "models.json"))[`${repo}:Q8_0`]!.file).toBe(`hf/${ORG}/Split-GGUF/Q8_0/Tiny-Q8_0-00001-of-00003.gguf`);
    expect(new Set(progress.map((p) => p.fileIndex))).toEqual(new Set([1, 2, 3]));
    expect(progress.at(-1)!.allBytes).toBe(got.sizeBytes);
    // The first shard was moved in after the others.
    const [first, ...rest] = shards.map((s) => statSync(s).ctimeMs);
    for (const t of rest) expect(first!).toBeGreaterThanOrEqual(t!);

    const server = await startLlamaServer(got.path);
    try {
      const res = await fetch(`${server.url}/completion`, { method: "POST", body: JSON.stringify({ prompt: "hello world", n_predict: 4 }) });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { tokens_predicted: number };
      expect(body.tokens_predicted).toBeGreaterThan(0);
    } finally {
      await server.stop();
    }
  }, 120_000);

  test("a model with a projector: both installed, the F16 projector chosen, models.json names it, and the pair reads an image", async () => {
    const repo = `${ORG}/Vision-GGUF`;
    const modelsDir = dirs.fresh("models");
    const got = await pull(repo, { modelsDir });
    const dir = join(modelsDir, "hf", ORG, "Vision-GGUF");
    expect(got.path).toBe(join(dir, "Vision-Q8_0.gguf"));
    expect(got.mmproj).toBe(join(dir, "mmproj-Vision-F16.gguf"));
    expect(installed(modelsDir)).toEqual([`hf/${ORG}/Vision-GGUF/Vision-Q8_0.gguf`, `hf/${ORG}/Vision-GGUF/mmproj-Vision-F16.gguf`, "models.json"]);
    expect(readRegistry(join(modelsDir, "models.json"))[repo]).toMatchObject({
      file: `hf/${ORG}/Vision-GGUF/Vision-Q8_0.gguf`,
      mmproj: `hf/${ORG}/Vision-GGUF/mmproj-Vision-F16.gguf`,
    });
    expect(got.sizeBytes).toBe(statSync(got.path).size + statSync(got.mmproj!).size);

    const server = await startLlamaServer(got.path, ["--mmproj", got.mmproj!]);
    try {
      const ask = { model: "m", max_tokens: 1, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: pngDataUrl(gradientPng(16, 16)) } }] }] };
      const res = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify(ask) });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens).toBeGreaterThan(imageTokens(projectorShape(presetShape("vision", "q8_0").nEmbd)));
    } finally {
      await server.stop();
    }
  }, 120_000);

  test("a quant that is not there: the error lists those that are, before any download", async () => {
    const before = hub.requests.length;
    const err = await pullError(pull(`${ORG}/Tiny-GGUF:Q5_K_M`), "quant_not_found");
    expect(err.message).toContain("has no Q5_K_M");
    expect(err.message).toContain("Q8_0, F32");
    expect(hub.requests.slice(before).filter((r) => r.server === "cdn" || r.path.includes("/resolve/"))).toEqual([]);
  });

  test("no space: a file of 1e15 bytes is refused before a byte is fetched", async () => {
    const repo = `${ORG}/Huge-GGUF`;
    const modelsDir = dirs.fresh("models");
    const before = hub.requests.length;
    const err = await pullError(pull(repo, { modelsDir }), "no_space");
    expect(err.message).toContain("free");
    expect(hub.downloads(repo, "Huge-Q4_K_M.gguf")).toBe(0);
    expect(hub.requests.slice(before).filter((r) => r.server === "cdn" || r.path.includes("/resolve/"))).toEqual([]);
    expect(installed(modelsDir)).toEqual([]);
  });

  test("a URL: fetched into the models dir under its file name, checked against the hash the redirect states", async () => {
    const modelsDir = dirs.fresh("models");
    const url = `${hub.endpoint}/${ORG}/Tiny-GGUF/resolve/main/Tiny-Q8_0.gguf`;
    const got = await pull(url, { modelsDir });
    expect(got).toMatchObject({ name: "Tiny-Q8_0", ref: url, path: join(modelsDir, "Tiny-Q8_0.gguf"), alreadyHad: false });
    expect(sha256(fileBytes(got.path))).toBe(hub.sha256(`${ORG}/Tiny-GGUF`, "Tiny-Q8_0.gguf"));
    expect((await pull(url, { modelsDir })).alreadyHad).toBe(true);
    // A peer's URL must be https (and public): not this one.
    await pullError(pull(url, { modelsDir: dirs.fresh("models"), fromPeer: true }), "bad_reference");
  });

  test("a name already given to another model is refused before anything is fetched", async () => {
    const modelsDir = dirs.fresh("models");
    writeFileSync(join(modelsDir, "models.json"), JSON.stringify({ mine: { file: "elsewhere.gguf" } }));
    const err = await pullError(pull(`${ORG}/Tiny-GGUF`, { modelsDir, name: "mine" }), "name_taken");
    expect(err.message).toContain("mine");
    writeFileSync(join(modelsDir, "taken.gguf"), "GGUF");
    await pullError(pull(`${ORG}/Tiny-GGUF`, { modelsDir, name: "taken" }), "name_taken");
    expect(installed(modelsDir)).toEqual(["models.json", "taken.gguf"]);
  });

  test("a reference that is none is refused", async () => {
    await pullError(pull("org/repo:"), "bad_reference");
    await pullError(pull("just-a-local-name"), "bad_reference");
  });
});

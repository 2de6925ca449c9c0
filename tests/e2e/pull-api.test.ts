/**
 * Managing models through every door, against a fake Hugging Face Hub on loopback (HF_ENDPOINT)
 * serving real test GGUFs: the `ollama` npm client pulls with NDJSON progress and then chats with
 * the model by the name it pulled; Lemonade's `/api/v1/pull` streams its server-sent events and
 * the model is listed and answers; a missing quant and a gated repo fail in each API's shape;
 * deletes refuse a loaded model (409) and then remove files, registry entry and list entry; two
 * clients share one pull, the last to leave cancels it and the next pull resumes from what it
 * kept; a third pull at once is told to wait (429). Then the CLI: `mesh pull`, `mesh models` and
 * `mesh rm` without a node (straight into --models-dir) and through one.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { Ollama } from "ollama";
import { readSseEvents } from "../../commands/pull.ts";
import { chat, loaded, post } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startFakeHub, type FakeHub } from "../../harness/fake-hub.ts";
import { testModel } from "../../harness/models.ts";
import { meshCommand, SMALL_LLAMA, startNode, type TestNode } from "../../harness/node.ts";
import { tempDirs } from "../../harness/transfer.ts";
import { waitFor, withDeadline } from "../../harness/wait.ts";

const dirs = tempDirs("mesh-pull-api-");
let hub: FakeHub;
let node: TestNode;
let home: string;
/** Files by repo, each different bytes (pulls stage by hash). */
const FILES = {
  repo: "repo-Q8_0.gguf",
  other: "other-F32.gguf",
  slow: "slow-Q8_0.gguf",
  cut: "cut-F32.gguf",
  cli: "cli-Q8_0.gguf",
} as const;

beforeAll(async () => {
  const [tinyQ8, tinyF32, embedQ8, embedF32] = await Promise.all([testModel("tiny", "q8_0"), testModel("tiny", "f32"), testModel("embed", "q8_0"), testModel("embed", "f32")]);
  hub = await startFakeHub({
    repos: [
      { repo: "org/repo", files: { [FILES.repo]: { fromFile: tinyQ8 }, "README.md": new TextEncoder().encode("# repo\n") } },
      { repo: "org/other", files: { [FILES.other]: { fromFile: tinyF32 } } },
      { repo: "org/slow", files: { [FILES.slow]: { fromFile: embedQ8 } } },
      { repo: "org/cut", files: { [FILES.cut]: { fromFile: embedF32 } } },
      { repo: "org/cli", files: { [FILES.cli]: { fromFile: tinyQ8 } } },
      { repo: "org/gated", files: { "gated-Q8_0.gguf": { fromFile: tinyQ8 } }, gated: true },
    ],
  });
  home = dirs.fresh("home");
  // 2 GiB offered to models: which well-known models fit is then the same on any machine.
  // A short idle timeout: a stalled pull's stream must live on its keep-alives.
  node = await startNode([...SMALL_LLAMA, "--vram", "2GiB", "--idle-timeout", "2s"], { env: { HF_ENDPOINT: hub.endpoint, HOME: home } });
});
afterAll(async () => {
  await node?.stop();
  await hub?.stop();
  await killAllChildren();
  dirs.remove();
});

const NAME = "hf.co/org/repo:Q8_0";
const registry = () => {
  const path = join(node.modelsDir, "models.json");
  return existsSync(path) ? (JSON.parse(readFileSync(path, "utf8")) as Record<string, { file: string; ref?: string; pulled?: boolean }>) : {};
};
const listed = async () => ((await (await fetch(`${node.url}/v1/models`)).json()) as { data: { id: string; store?: string; checkpoint?: string; status?: string }[] }).data;

describe("pulling", () => {
  test("the ollama client pulls with progress, then chats with the model by the name it pulled", async () => {
    const ollama = new Ollama({ host: node.url });
    const parts = [];
    for await (const part of await ollama.pull({ model: NAME, stream: true })) parts.push(part);
    expect(parts[0]).toEqual({ status: "pulling manifest" } as never);
    const progress = parts.filter((p) => p.status === `pulling ${FILES.repo}`);
    expect(progress.length).toBeGreaterThan(0);
    expect(progress.at(-1)).toMatchObject({ digest: FILES.repo, total: 291_296, completed: 291_296 });
    expect(parts.at(-1)).toEqual({ status: "success" } as never);

    expect(existsSync(join(node.modelsDir, "hf", "org", "repo", FILES.repo))).toBe(true);
    expect(registry()[NAME]).toMatchObject({ file: join("hf", "org", "repo", FILES.repo), pulled: true });
    expect((await ollama.list()).models.map((m) => m.name)).toContain(NAME);

    const answer = await ollama.chat({ model: NAME, messages: [{ role: "user", content: "hello" }], stream: false, options: { num_predict: 2 } });
    expect(answer).toMatchObject({ model: NAME, done: true, message: { role: "assistant" } });

    // Again: nothing downloaded, one final line.
    expect(await ollama.pull({ model: NAME, stream: false })).toEqual({ status: "success" } as never);
    expect(hub.downloads("org/repo", FILES.repo)).toBe(1);
  });

  test("Lemonade's /api/v1/pull streams progress events, then the model is listed and answers", async () => {
    const res = await post(node, "/api/v1/pull", { model_name: "user.other", checkpoint: "org/other:F32", stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const { events, rest } = readSseEvents(await res.text());
    expect(rest).toBe("");
    expect(events.length).toBeGreaterThanOrEqual(2);
    const progress = events.filter((e) => e.event === "progress").map((e) => JSON.parse(e.data) as Record<string, unknown>);
    expect(progress.length).toBeGreaterThan(0);
    expect(progress.at(-1)).toMatchObject({ file: FILES.other, file_index: 1, total_files: 1, percent: 100 });
    expect(events.at(-1)!.event).toBe("complete");
    expect(JSON.parse(events.at(-1)!.data)).toMatchObject({ model_name: "user.other", percent: 100, total_files: 1 });

    expect((await listed()).find((m) => m.id === "user.other")).toMatchObject({ store: "models-dir" });
    const answer = await chat(node, "user.other");
    expect(answer.status).toBe(200);
    expect(((await answer.json()) as { choices: unknown[] }).choices.length).toBe(1);
  });

  test("a missing quant: 404 in Ollama's shape and in Lemonade's, naming the quants there are", async () => {
    const ollama = new Ollama({ host: node.url });
    const streamed = await ollama.pull({ model: "hf.co/org/repo:Q2_K", stream: true }).catch((e: unknown) => e);
    expect(streamed).toMatchObject({ status_code: 404 });
    expect((streamed as Error).message).toContain("Q8_0");
    const whole = await post(node, "/api/pull", { model: "hf.co/org/repo:Q2_K", stream: false });
    expect(whole.status).toBe(404);
    expect(((await whole.json()) as { error: string }).error).toContain("quants there: Q8_0");

    const lemonade = await post(node, "/api/v1/pull", { model_name: "org/repo:Q2_K", stream: true });
    expect(lemonade.status).toBe(404);
    const b = (await lemonade.json()) as { status: string; message: string; error: { code: string } };
    expect(b).toMatchObject({ status: "error", error: { code: "quant_not_found" } });
    expect(b.message).toContain("Q8_0");
    expect(readdirSync(join(node.modelsDir, "hf", "org"))).not.toContain("repo-Q2_K");
  });

  test("a gated repo without the node's token: 401, saying to set HF_TOKEN on the node", async () => {
    const res = await post(node, "/api/v1/pull", { model_name: "org/gated:Q8_0" });
    expect(res.status).toBe(401);
    const b = (await res.json()) as { message: string; error: { code: string } };
    expect(b.error.code).toBe("gated");
    expect(b.message).toContain("set HF_TOKEN on the node");
    const ollama = await post(node, "/api/pull", { model: "org/gated:Q8_0", stream: false });
    expect(ollama.status).toBe(401);
    expect(((await ollama.json()) as { error: string }).error).toContain("HF_TOKEN");
  });
});

test("/v1/models?catalog=true: the well-known models, each saying whether it fits this mesh", async () => {
  const res = await fetch(`${node.url}/v1/models?catalog=true`);
  expect(res.status).toBe(200);
  const data = ((await res.json()) as { data: { id: string; checkpoint: string; fit: string; downloaded: boolean; need_bytes: number }[] }).data;
  expect(data.find((m) => m.id === "qwen2.5-0.5b-instruct")).toMatchObject({ checkpoint: "bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M", fit: "one-node", downloaded: false });
  expect(data.find((m) => m.id === "qwen2.5-7b-instruct")).toMatchObject({ fit: "none" });
  // Without the query, the listing is this node's models as before.
  expect((await listed()).map((m) => m.id)).not.toContain("qwen2.5-0.5b-instruct");
  expect((await fetch(`${node.url}/api/v1/models?catalog=true`)).status).toBe(200);
});

describe("deleting", () => {
  test("the ollama client: 409 while loaded, then gone from the list, the disk and models.json", async () => {
    // Loaded by a request (the other pulled model may hold the one slot now).
    expect((await chat(node, NAME)).status).toBe(200);
    await waitFor(async () => (await loaded(node)).some((s) => s.model_name === NAME), { what: `${NAME} to be loaded` });
    const ollama = new Ollama({ host: node.url });
    const refused = await ollama.delete({ model: NAME }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ status_code: 409 });
    expect((refused as Error).message).toContain(`model "${NAME}" is loaded; unload it first`);
    expect(existsSync(join(node.modelsDir, "hf", "org", "repo", FILES.repo))).toBe(true);

    expect((await post(node, "/api/v1/unload", { model_name: NAME })).status).toBe(200);
    await ollama.delete({ model: NAME });
    expect((await ollama.list()).models.map((m) => m.name)).not.toContain(NAME);
    expect(existsSync(join(node.modelsDir, "hf", "org", "repo"))).toBe(false);
    expect(registry()[NAME]).toBeUndefined();
    expect(registry()["user.other"]).toBeDefined();
  });

  test("Lemonade's /api/v1/delete: 409 while loaded, then success", async () => {
    expect((await chat(node, "user.other")).status).toBe(200);
    await waitFor(async () => (await loaded(node)).some((s) => s.model_name === "user.other"), { what: "user.other to be loaded" });
    const refused = await post(node, "/api/v1/delete", { model_name: "user.other" });
    expect(refused.status).toBe(409);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("model_loaded");
    expect((await post(node, "/api/v1/unload", {})).status).toBe(200);
    const res = await post(node, "/api/v1/delete", { model_name: "user.other" });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: "success", message: "Deleted model: user.other" });
    expect((await listed()).map((m) => m.id)).not.toContain("user.other");
    expect(existsSync(join(node.modelsDir, "hf", "org", "other"))).toBe(false);
    expect(registry()["user.other"]).toBeUndefined();
  });
});

/**
 * A streaming pull whose head came, read all the time as a real client reads it (the node cuts a
 * client that stops reading for its idle timeout), with the lines so far.
 */
async function openPull(model: string, signal: AbortSignal) {
  const res = await fetch(`${node.url}/api/pull`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model }), signal });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let ended = false;
  let wake: (() => void) | undefined;
  void (async () => {
    try {
      for (let r = await reader.read(); !r.done; r = await reader.read()) {
        text += decoder.decode(r.value, { stream: true });
        wake?.();
      }
    } catch {
      // aborted by the test: the stream is over
    }
    ended = true;
    wake?.();
  })();
  return {
    /** Waits until a line matches (or the lines so far do); resolves with every line so far. */
    async until(test: (line: Record<string, unknown>) => boolean, all?: (lines: Record<string, unknown>[]) => boolean): Promise<Record<string, unknown>[]> {
      for (;;) {
        const news = new Promise<void>((r) => (wake = r));
        const whole = text.slice(0, text.lastIndexOf("\n") + 1);
        const lines = whole.split("\n").filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
        if (all ? all(lines) : lines.some(test)) return lines;
        if (ended) throw new Error(`the stream ended before the line looked for: ${text}`);
        await news;
      }
    },
  };
}

test("two clients, one pull; the last to leave cancels it; the next pull resumes; a third at once waits", async () => {
  // Both transfers stop after their first bytes and hang until released.
  hub.cutNext("org/slow", FILES.slow, 100_000, { hold: true });
  hub.cutNext("org/cut", FILES.cut, 300_000, { hold: true });
  const first = new AbortController();
  const second = new AbortController();
  const lone = new AbortController();
  const progressed = (l: Record<string, unknown>) => typeof l.completed === "number";
  const a = await openPull("hf.co/org/slow:Q8_0", first.signal);
  await a.until(progressed);
  // The second joins the first: it is shown the progress so far at once.
  const b = await openPull("hf.co/org/slow:Q8_0", second.signal);
  await b.until(progressed);
  const c = await openPull("hf.co/org/cut:F32", lone.signal);
  await c.until(progressed);
  // Stalled well past twice the 2 s idle timeout (where Bun cuts a stream), it lives on: the last line again every second.
  const repeats = (lines: Record<string, unknown>[]) => lines.filter((l) => JSON.stringify(l) === JSON.stringify(lines.at(-1))).length;
  const stalled = await withDeadline(b.until(() => false, (lines) => progressed(lines.at(-1) ?? {}) && repeats(lines) >= 6), 30_000, "keep-alive lines");
  expect(stalled.at(-1)).toMatchObject({ status: `pulling ${FILES.slow}`, digest: FILES.slow });

  const third = await post(node, "/api/pull", { model: NAME, stream: false });
  expect(third.status).toBe(429);
  expect(third.headers.get("retry-after")).toBe("10");
  expect(((await third.json()) as { error: string }).error).toContain("at most 2 at once");

  first.abort();
  await node.child.waitForOutput(/a client stopped following the pull; it goes on name=hf\.co\/org\/slow:Q8_0 still=1/, 30_000);
  // Its first 300000 bytes are on disk before its client goes.
  const staged = join(node.modelsDir, ".pulls", hub.sha256("org/cut", FILES.cut), ".partial");
  const partSizes = () => (existsSync(staged) ? readdirSync(staged).filter((f) => f.endsWith(".part")).map((f) => statSync(join(staged, f)).size) : []);
  await waitFor(() => partSizes()[0] === 300_000, { what: "the cut transfer's first bytes on disk" });
  lone.abort();
  await node.child.waitForOutput(/no client follows the pull any more; cancelling it .* name=hf\.co\/org\/cut:F32 still=0/, 30_000);
  await node.child.waitForOutput(/pull cancelled name=hf\.co\/org\/cut:F32/, 30_000);
  expect((await listed()).map((m) => m.id)).not.toContain("hf.co/org/cut:F32");
  // What it downloaded is kept for the next pull.
  expect(partSizes()).toEqual([300_000]);

  // The held transfers end; the slow pull resumes from where it stood and its client sees it through.
  hub.release();
  const lines = await withDeadline(b.until((l) => l.status === "success" || "error" in l), 60_000, "the joined pull to end");
  expect(lines.at(-1)).toEqual({ status: "success" });
  expect((await listed()).map((m) => m.id)).toContain("hf.co/org/slow:Q8_0");

  // Pulled again: it resumes from the kept part (a Range from past its start), downloaded once in all.
  expect(await (await post(node, "/api/pull", { model: "hf.co/org/cut:F32", stream: false })).json()).toEqual({ status: "success" });
  const ranges = hub.requests.filter((r) => r.server === "cdn" && r.method === "GET" && r.path.includes(hub.sha256("org/cut", FILES.cut))).map((r) => r.range);
  expect(ranges.at(-1)).toBe("bytes=300000-");
  expect(hub.downloads("org/cut", FILES.cut)).toBe(1);
});

describe("the CLI", () => {
  const CLI_NAME = "hf.co/org/cli:Q8_0";
  async function mesh(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    const proc = Bun.spawn([...meshCommand(), ...args], {
      env: { ...process.env, HF_ENDPOINT: hub.endpoint, HOME: home, MESH_SCAN_MODEL_STORES: "off" },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [code, stdout, stderr] = await withDeadline(Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]), 60_000, `mesh ${args.join(" ")}`);
    return { code, stdout, stderr };
  }

  test("without a node: mesh pull into --models-dir, mesh models lists it, mesh rm removes it", async () => {
    const models = dirs.fresh("cli-models");
    // Port 1: nothing answers there, so the commands work on the models dir themselves.
    const here = ["--models-dir", models, "--port", "1"];
    const pulled = await mesh(["pull", CLI_NAME, ...here]);
    expect(pulled).toMatchObject({ code: 0 });
    expect(pulled.stdout).toContain(`pulled ${CLI_NAME} (1 file, 0.3 MiB) into ${models}`);
    // Not a terminal: progress as log lines.
    expect(pulled.stderr).toContain(`pulling ${CLI_NAME}:`);
    expect(existsSync(join(models, "hf", "org", "cli", FILES.cli))).toBe(true);

    const list = await mesh(["models", "--json", ...here]);
    expect(list.code).toBe(0);
    expect(JSON.parse(list.stdout)).toEqual([{ name: CLI_NAME, sizeBytes: 291_296, quant: "Q8_0", store: "models-dir", path: join(models, "hf", "org", "cli", FILES.cli), loaded: false }]);
    const table = await mesh(["models", ...here]);
    expect(table.stdout.split("\n")[0]).toMatch(/^NAME +SIZE +QUANT +STORE +PATH +LOADED$/);
    expect(table.stdout).toContain(CLI_NAME);

    const missing = await mesh(["rm", "nowhere", ...here]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('model "nowhere" is not on this node');
    const removed = await mesh(["rm", CLI_NAME, ...here]);
    expect(removed).toMatchObject({ code: 0 });
    expect(removed.stdout).toContain(`deleted ${CLI_NAME} (1 file) from ${models}`);
    expect(existsSync(join(models, "hf"))).toBe(false);
    expect(JSON.parse(readFileSync(join(models, "models.json"), "utf8"))).toEqual({});
  });

  test("through the node: the pull lands in its models dir, listed as not loaded, then removed", async () => {
    const there = ["--port", String(node.port)];
    const pulled = await mesh(["pull", "org/cli:Q8_0", "--name", "cli-model", ...there]);
    expect(pulled).toMatchObject({ code: 0 });
    expect(pulled.stdout).toContain(`pulled cli-model (1 file, 0.3 MiB) through the node at ${node.url}`);
    expect(existsSync(join(node.modelsDir, "hf", "org", "cli", FILES.cli))).toBe(true);

    const list = JSON.parse((await mesh(["models", "--json", ...there])).stdout) as { name: string; loaded: boolean; store: string }[];
    expect(list.find((m) => m.name === "cli-model")).toMatchObject({ loaded: false, store: "models-dir" });

    const gated = await mesh(["pull", "org/gated:Q8_0", ...there]);
    expect(gated.code).toBe(1);
    expect(gated.stderr).toContain("set HF_TOKEN on the node");

    const removed = await mesh(["rm", "cli-model", ...there]);
    expect(removed).toMatchObject({ code: 0 });
    expect(removed.stdout).toContain(`deleted cli-model (1 file) through the node at ${node.url}`);
    expect((await listed()).map((m) => m.id)).not.toContain("cli-model");
  });
});

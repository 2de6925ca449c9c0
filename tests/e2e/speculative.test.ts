/**
 * Speculative decoding on a real node and llama-server: a draft named in models.json loads beside
 * its target (its flags on llama-server's real command line) and is used (the acceptance counters
 * in /metrics move after a completion); `draft_model` on /api/v1/load swaps in another draft (same
 * vocabulary, other weights); names that are paths, unknown or not text models are a 400 that loads
 * nothing; a target split over a peer's rpc-server keeps its draft on the host. Test models: `tiny` at seed 1 is the target (and, drafting for itself, the upper bound),
 * `tiny` at seed 2 the mismatched draft.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loaded, post, server } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA, startNode, type TestNode } from "../../harness/node.ts";
import { parseScrape, valueOf } from "../../harness/prometheus.ts";
import { waitFor } from "../../harness/wait.ts";
import { readGgufFacts } from "../../models/gguf-info.ts";
import { needOf } from "../../models/model-need.ts";

let n: TestNode;
const scratch = mkdtempSync(join(tmpdir(), "mesh-speculative-"));

beforeAll(async () => {
  const registry = join(scratch, "models.json");
  writeFileSync(registry, JSON.stringify({ target: { file: "target.gguf", draft: "target" } }));
  n = await startNode(SMALL_LLAMA, {
    models: {
      "target.gguf": await testModel("tiny", "f32"),
      "other.gguf": await testModel("tiny", "f32", 2),
      "embed.gguf": await testModel("embed", "q8_0"),
      "models.json": registry,
    },
  });
});
afterAll(async () => {
  await n?.stop();
  await killAllChildren();
  rmSync(scratch, { recursive: true, force: true });
});

/** llama-server's argv as the kernel has it. */
async function commandLine(model: string, node: TestNode = n): Promise<string[]> {
  const { pid } = await server(node, model);
  return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
}

const flagValue = (argv: string[], flag: string) => argv[argv.indexOf(flag) + 1];

async function drafted(model: string, node: TestNode = n): Promise<{ tokens: number; accepted: number }> {
  const s = parseScrape(await (await fetch(`${node.url}/metrics`)).text());
  return { tokens: valueOf(s, "mesh_draft_tokens_total", { model }), accepted: valueOf(s, "mesh_draft_accepted_total", { model }) };
}

/** Greedy, so a draft that is the target proposes what the target picks. */
const complete = (stream: boolean) =>
  post(n, "/v1/chat/completions", { model: "target", messages: [{ role: "user", content: "hello" }], max_tokens: 16, ignore_eos: true, temperature: 0, stream });

describe("a draft loads and is used", () => {
  test("models.json's draft: on llama-server's command line, and its tokens accepted", async () => {
    const before = await drafted("target");
    const res = await complete(false);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { timings?: { draft_n?: number; draft_n_accepted?: number } };
    const argv = await commandLine("target");
    expect(flagValue(argv, "--spec-draft-model")).toBe(join(n.modelsDir, "target.gguf"));
    expect(flagValue(argv, "--spec-type")).toBe("draft-simple");
    // Not split: the draft follows the target's devices.
    expect(argv).not.toContain("--spec-draft-device");
    expect(body.timings?.draft_n).toBeGreaterThan(0);
    const after = await drafted("target");
    expect(after.tokens - before.tokens).toBe(body.timings!.draft_n!);
    expect(after.accepted - before.accepted).toBe(body.timings!.draft_n_accepted!);
    // The target drafting for itself, greedily: every drafted token is what it would have picked.
    expect(after.accepted - before.accepted).toBe(after.tokens - before.tokens);
  });

  test("draft_model on load swaps the draft; a stream's figures count too", async () => {
    const res = await post(n, "/api/v1/load", { model_name: "target", draft_model: "other" });
    expect(res.status).toBe(200);
    expect(flagValue(await commandLine("target"), "--spec-draft-model")).toBe(join(n.modelsDir, "other.gguf"));
    const health = (await (await fetch(`${n.url}/api/v1/health`)).json()) as { all_models_loaded: { model_name: string; recipe_options: Record<string, unknown> }[] };
    expect(health.all_models_loaded.find((s) => s.model_name === "target")?.recipe_options.draft_model).toBe("other");
    const before = await drafted("target");
    const stream = await complete(true);
    expect(stream.status).toBe(200);
    expect(await stream.text()).toContain("data: [DONE]");
    const after = await drafted("target");
    expect(after.tokens).toBeGreaterThan(before.tokens);
    expect(after.accepted).toBeGreaterThanOrEqual(before.accepted);
  });
});

describe("bad drafts are a 400 that loads nothing", () => {
  const cases: [string, Record<string, unknown>, string, string][] = [
    ["an absolute path", { draft_model: "/etc/passwd" }, "invalid_draft_model", "looks like a path"],
    ["a path out of the models dir", { draft_model: "../target" }, "invalid_draft_model", "looks like a path"],
    ["a file name", { draft_model: "other.gguf" }, "invalid_draft_model", "looks like a path"],
    ["an unknown model", { draft_model: "nope" }, "invalid_draft_model", "no model of that name on this node; text models here: other, target"],
    ["an embedding model", { draft_model: "embed" }, "invalid_draft_model", "a draft must be a text model"],
    ["a draft flag in llamacpp_args", { llamacpp_args: "-md /etc/passwd" }, "invalid_llamacpp_args", "draft_model"],
  ];
  test.each(cases)("%s", async (_, extra, code, message) => {
    const pidBefore = (await server(n, "target")).pid;
    const res = await post(n, "/api/v1/load", { model_name: "target", ...extra });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe(code);
    expect(body.error.message).toContain(message);
    expect((await server(n, "target")).pid).toBe(pidBefore);
  });
  test("an embedding model takes no draft", async () => {
    const res = await post(n, "/api/v1/load", { model_name: "embed", draft_model: "target" });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("only text models take a draft");
  });
});

describe("a split target", () => {
  const mesh: MeshTestNode[] = [];
  afterAll(async () => {
    await Promise.all(mesh.splice(0).map((m) => m.stop()));
  });

  test("keeps its draft on the host: llama-server is told so, and the draft is used", async () => {
    const target = await testModel("tiny", "f32");
    // Each node offers 60% of what the target needs at the test context: it runs on both.
    const vram = ["--vram", String(Math.ceil(needOf(statSync(target).size, await readGgufFacts(target), 512) * 0.6))];
    const worker = await startMeshNode([...SMALL_LLAMA, ...vram]);
    mesh.push(worker);
    const registry = join(scratch, "split-models.json");
    writeFileSync(registry, JSON.stringify({ target: { file: "target.gguf", draft: "other" } }));
    const host = await startMeshNode([...SMALL_LLAMA, ...vram, "--join", worker.token, "--model", "target"], {
      models: { "target.gguf": target, "other.gguf": await testModel("tiny", "f32", 2), "models.json": registry },
    });
    mesh.push(host);
    await waitForFullMesh([worker, host]);
    await waitFor(async () => (await loaded(host)).find((s) => s.model_name === "target" && (s as { rpc_workers?: string[] }).rpc_workers?.length === 2 && s.state === "ready"), {
      what: "the target to run across the host's and the worker's rpc-servers",
      timeoutMs: 60_000,
    });
    const argv = await commandLine("target", host);
    expect(argv).toContain("--rpc");
    expect(flagValue(argv, "--spec-draft-model")).toBe(join(host.modelsDir, "other.gguf"));
    // A CPU build has no accelerators of its own: the draft stays in the host's memory, off every RPC device.
    expect(flagValue(argv, "--spec-draft-device")).toBe("none");
    const res = await post(host, "/v1/chat/completions", { model: "target", messages: [{ role: "user", content: "hello" }], max_tokens: 8, ignore_eos: true, temperature: 0 });
    expect(res.status).toBe(200);
    expect((await drafted("target", host)).tokens).toBeGreaterThan(0);
  });
});

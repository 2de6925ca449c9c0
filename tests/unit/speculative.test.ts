/**
 * Speculative decoding as data: which draft a load uses (`chooseDraft`), the flags that launch it
 * (unsplit, split over RPC workers with and without local accelerators), that no user's arguments
 * can set or override a draft flag, and the acceptance counters read from llama-server's timings.
 */
import { describe, expect, test } from "bun:test";
import { chooseDraft, draftNameProblem, type DraftTarget } from "../../models/model-draft.ts";
import type { ModelInfo } from "../../models/model-store.ts";
import { NodeMetrics } from "../../metrics/node-metrics.ts";
import { PoolError } from "../../pool/errors.ts";
import { draftArgs, launchArgv, projectorArgs, resolveDraft, type DraftPlacement } from "../../pool/load-launch.ts";
import { parseRequestArgs } from "../../pool/request-args.ts";
import { checkUserArgs, loadArgs } from "../../pool/server-args.ts";
import { toStats } from "../../metrics/request-stats.ts";
import { parseScrape, valueOf } from "../../harness/prometheus.ts";

const model = (name: string, over: Partial<ModelInfo> = {}): ModelInfo =>
  ({ name, path: `/models/${name}.gguf`, type: "llm", problem: undefined, draft: undefined, mmproj: undefined, ctxSize: undefined, facts: {}, files: [], ...over }) as ModelInfo;

const KNOWN: ModelInfo[] = [
  model("big"),
  model("small"),
  model("org/small-q4"),
  model("embed", { type: "embedding" }),
  model("broken", { problem: "split model is missing shard(s) 2" }),
  model("unread", { facts: undefined }),
  model("partial", { files: ["/nonexistent/mesh-test/partial.gguf"] }),
];

describe("chooseDraft", () => {
  type Case = [string, DraftTarget, string | undefined, { draft: string | undefined; from: string } | { error: string }];
  const cases: Case[] = [
    ["no draft anywhere: none", model("big"), undefined, { draft: undefined, from: "none" }],
    ["models.json names one", model("big", { draft: "small" }), undefined, { draft: "small", from: "models.json" }],
    ["the load's draft_model wins over models.json", model("big", { draft: "small" }), "org/small-q4", { draft: "org/small-q4", from: "request" }],
    ["a folder-qualified name is a name", model("big"), "org/small-q4", { draft: "org/small-q4", from: "request" }],
    ["the target drafting for itself (the upper bound)", model("big"), "big", { draft: "big", from: "request" }],
    ["an absolute path", model("big"), "/etc/passwd", { error: "looks like a path" }],
    ["a relative path", model("big"), "../models/small", { error: "looks like a path" }],
    ["a dot path", model("big"), "./small", { error: "looks like a path" }],
    ["a home path", model("big"), "~/small", { error: "looks like a path" }],
    ["a Windows path", model("big"), "C:\\models\\small", { error: "looks like a path" }],
    ["a file name", model("big"), "small.gguf", { error: "looks like a path" }],
    ["an unknown name lists the text models", model("big"), "tiny", { error: "no model of that name on this node; text models here: big, small, org/small-q4, broken, unread, partial" }],
    ["an embedding model cannot draft", model("big"), "embed", { error: '"embed" is a embedding model; a draft must be a text model' }],
    ["a model that cannot load cannot draft", model("big"), "broken", { error: "cannot load: split model is missing shard(s) 2" }],
    ["a draft whose GGUF header was unreadable", model("big"), "unread", { error: '"unread" cannot load: its GGUF header could not be read' }],
    ["a draft whose files are not all there", model("big"), "partial", { error: '"partial" cannot load: missing file(s) /nonexistent/mesh-test/partial.gguf' }],
    ["an embedding target takes no draft", model("embed", { type: "embedding" }), "small", { error: "only text models take a draft" }],
    ["a bad models.json draft says to fix models.json", model("big", { draft: "gone" }), undefined, { error: 'models.json names draft "gone" for "big", but no model' }],
  ];
  test.each(cases)("%s", (_, target, requested, want) => {
    const got = chooseDraft(target, requested, KNOWN);
    if ("error" in want) {
      expect(got.ok).toBe(false);
      if (!got.ok) expect(got.error).toContain(want.error);
    } else {
      expect(got).toEqual({ ok: true, draft: want.draft === undefined ? undefined : expect.objectContaining({ name: want.draft }), from: want.from } as never);
    }
  });
  test("a request's error names draft_model; models.json's ends with where to fix it", () => {
    const fromRequest = chooseDraft(model("big"), "nope", KNOWN);
    const fromFile = chooseDraft(model("big", { draft: "nope" }), undefined, KNOWN);
    expect(!fromRequest.ok && fromRequest.error).toStartWith('draft_model "nope": ');
    expect(!fromFile.ok && fromFile.error).toEndWith("; fix its entry in models.json");
  });
  test.each(["small", "org/small-q4", "qwen2.5:0.5b", "a@ollama"])("%p is a name", (name) => expect(draftNameProblem(name)).toBeUndefined());
});

describe("resolveDraft", () => {
  test("asks the store nothing when no draft is named", async () => {
    let asked = 0;
    const known = async () => (asked++, KNOWN);
    expect(await resolveDraft(model("big"), {}, known)).toBeUndefined();
    expect(asked).toBe(0);
  });
  test("an unknown draft is a 400 invalid_draft_model, before any launch", async () => {
    const err = await resolveDraft(model("big"), { draftModel: "nope" }, async () => KNOWN).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PoolError);
    expect(err).toMatchObject({ status: 400, code: "invalid_draft_model" });
  });
  test("the draft is the store's model, with the store's path", async () => {
    expect((await resolveDraft(model("big", { draft: "small" }), {}, async () => KNOWN))?.path).toBe("/models/small.gguf");
  });
});

describe("draft flags", () => {
  const alone: DraftPlacement = { split: false, localDevices: [] };
  const cases: [string, string | undefined, DraftPlacement, string[]][] = [
    ["no draft: no flags", undefined, alone, []],
    ["unsplit: the draft follows the target's devices", "/m/d.gguf", alone, ["--spec-draft-model", "/m/d.gguf", "--spec-type", "draft-simple"]],
    ["unsplit on a GPU node: still follows", "/m/d.gguf", { split: false, localDevices: ["Vulkan0"] }, ["--spec-draft-model", "/m/d.gguf", "--spec-type", "draft-simple"]],
    ["split, CPU-only host: the draft stays on the host's CPU", "/m/d.gguf", { split: true, localDevices: [] }, ["--spec-draft-model", "/m/d.gguf", "--spec-type", "draft-simple", "--spec-draft-device", "none"]],
    [
      "split, host with GPUs: the draft on the host's GPUs, never RPC",
      "/m/d.gguf",
      { split: true, localDevices: ["Vulkan0", "Vulkan1"] },
      ["--spec-draft-model", "/m/d.gguf", "--spec-type", "draft-simple", "--spec-draft-device", "Vulkan0,Vulkan1"],
    ],
    ["split, load asked for the CPU: the draft too", "/m/d.gguf", { split: true, backend: "cpu", localDevices: ["Vulkan0"] }, ["--spec-draft-model", "/m/d.gguf", "--spec-type", "draft-simple", "--spec-draft-device", "none"]],
  ];
  test.each(cases)("%s", (_, path, placement, want) => expect(draftArgs(path, placement)).toEqual(want));

  test.each<[string, string | undefined, DraftPlacement, string[]]>([
    ["no projector: no flags", undefined, { split: true, localDevices: [] }, []],
    ["unsplit: the projector where llama.cpp puts it", "/m/mmproj-x.gguf", { split: false, localDevices: ["Vulkan0"] }, []],
    ["split, CPU-only host: on the host's CPU, never a worker's device", "/m/mmproj-x.gguf", { split: true, localDevices: [] }, ["--no-mmproj-offload"]],
    ["split, host with GPUs: on the host's first", "/m/mmproj-x.gguf", { split: true, localDevices: ["Vulkan0", "Vulkan1"] }, ["--mmproj-device", "Vulkan0"]],
    ["split, load asked for the CPU: the projector too", "/m/mmproj-x.gguf", { split: true, backend: "cpu", localDevices: ["Vulkan0"] }, ["--no-mmproj-offload"]],
  ])("projector: %s", (_, mmproj, placement, want) => expect(projectorArgs(mmproj, placement)).toEqual(want));

  test("the launch: managed flags, the user's, then the draft's; a split draft on the host", () => {
    const { argv, ctxSize } = launchArgv({
      binary: "/bin/llama-server",
      model: model("big"),
      options: { draftModel: "small" },
      extraArgs: ["--threads", "1"],
      split: { endpoints: ["127.0.0.1:9001"] },
      draft: model("small"),
      localDevices: [],
      port: 5000,
      apiKeyFile: "/state/llama-server.key",
      defaultCtxSize: 512,
    });
    expect(ctxSize).toBe(512);
    expect(argv.slice(argv.indexOf("--rpc"))).toEqual(["--rpc", "127.0.0.1:9001", "-ngl", "999", "--threads", "1", "--spec-draft-model", "/models/small.gguf", "--spec-type", "draft-simple", "--spec-draft-device", "none"]);
  });
});

describe("draft flags cannot be smuggled", () => {
  const smuggled = [
    "--spec-draft-model /etc/x.gguf",
    "--spec-draft-model=/etc/x.gguf",
    "-md x.gguf",
    "--model-draft x.gguf",
    "--model_draft x.gguf",
    "-hfd org/repo",
    "--hf-repo-draft org/repo",
    "--spec-type ngram-mod",
    "--spec-default",
    "--spec-draft-device RPC0",
    "-devd RPC0",
    "--device_draft RPC0",
    "-otd blk=RPC0",
    "--fim-qwen-7b-spec",
  ];
  test.each(smuggled)("the operator's %p is refused", (args) => {
    expect(() => checkUserArgs(args.split(" "))).toThrow("llamacpp_args may not contain");
    expect(() => loadArgs(undefined, args, {})).toThrow("llamacpp_args may not contain");
  });
  test.each(smuggled)("a load request's %p is refused", (args) => {
    const r = parseRequestArgs(args);
    expect(r.ok).toBe(false);
  });
  test("the operator may still tune the draft", () => {
    expect(() => checkUserArgs(["--spec-draft-n-max", "8", "--spec-draft-p-min", "0.5", "-ngld", "99", "--spec-draft-threads", "2"])).not.toThrow();
  });
  test("a refused draft flag says where a draft comes from", () => {
    const r = parseRequestArgs("-md /tmp/x.gguf");
    expect(!r.ok && r.error).toContain("draft_model");
  });
});

describe("acceptance counters", () => {
  const drafted = { timings: { prompt_n: 5, predicted_n: 16, draft_n: 12, draft_n_accepted: 9 }, usage: undefined };
  test("timings with draft_n give the draft figures; without, none", () => {
    expect(toStats("m", "/v1/chat/completions", drafted, { firstByteMs: undefined, totalMs: 10 })).toMatchObject({ draft_tokens: 12, draft_accepted: 9 });
    const plain = toStats("m", "/v1/chat/completions", { timings: { predicted_n: 3 }, usage: undefined }, { firstByteMs: undefined, totalMs: 10 });
    expect(plain.draft_tokens).toBeUndefined();
  });
  test("mesh_draft_tokens_total and mesh_draft_accepted_total per model", async () => {
    const m = new NodeMetrics({ pool: { counters: { loads: 0, loadFailures: 0, evictions: new Map() }, loaded: () => [] } });
    m.countTokens(() => toStats("big", "/v1/chat/completions", drafted, { firstByteMs: undefined, totalMs: 10 }));
    m.countTokens(() => toStats("big", "/v1/chat/completions", drafted, { firstByteMs: undefined, totalMs: 10 }));
    m.countTokens(() => toStats("plain", "/v1/chat/completions", { timings: { predicted_n: 3 }, usage: undefined }, { firstByteMs: undefined, totalMs: 10 }));
    const s = parseScrape(await m.scrape());
    expect(valueOf(s, "mesh_draft_tokens_total", { model: "big" })).toBe(24);
    expect(valueOf(s, "mesh_draft_accepted_total", { model: "big" })).toBe(18);
    expect(valueOf(s, "mesh_draft_tokens_total", { model: "plain" })).toBe(0);
  });
});

import { describe, expect, test } from "bun:test";
import { checkUserArgs, loadArgs, ServerArgsError, serverArgv, splitArgs, type ServerArgsInput } from "../../pool/server-args.ts";
import { parseListDevices, availableBackends } from "../../llama/devices.ts";

describe("splitArgs", () => {
  test.each([
    ["", []],
    ["--threads 4", ["--threads", "4"]],
    ['--chat-template-kwargs \'{"a": 1}\' -t 2', ["--chat-template-kwargs", '{"a": 1}', "-t", "2"]],
    ['--system-prompt "two words"', ["--system-prompt", "two words"]],
  ] as const)("%p", (text, args) => expect(splitArgs(text)).toEqual([...args]));
  test.each(["-t 1 | rm -rf /", "-t 1; reboot", "a > b"])("shell syntax %p is refused", (text) => {
    expect(() => splitArgs(text)).toThrow("plain arguments");
  });
  test("$NAME stays as written: no shell runs, so nothing expands it to an empty word", () => {
    expect(splitArgs('--system-prompt "$HOME" -t $N')).toEqual(["--system-prompt", "$HOME", "-t", "$N"]);
  });
});

describe("checkUserArgs", () => {
  // llama.cpp reads `_` as `-` in long flags, so `--model_url` is `--model-url`.
  const managed = ["--port 1", "--host=0.0.0.0", "-m x.gguf", "--rpc h:1", "-c 100", "--embeddings", "--alias x", "-hf a/b", "--model_url u", "--api_key k"];
  test.each(managed)("%p is managed by the pool", (args) => {
    expect(() => checkUserArgs(args.split(" "))).toThrow("llamacpp_args may not contain");
  });
  test.each(["--threads 4", "-ngl 20", "--cache-reuse 256", "--pooling cls", "--jinja"])("%p is allowed", (args) => {
    expect(() => checkUserArgs(args.split(" "))).not.toThrow();
  });
});

describe("serverArgv", () => {
  const base: ServerArgsInput = {
    binary: "/bin/llama-server",
    modelPath: "/m/a.gguf",
    mmproj: undefined,
    alias: "a",
    type: "llm",
    poolingType: undefined,
    port: 5000,
    apiKeyFile: "/state/llama-server.key",
    ctxSize: 4096,
    extraArgs: [],
  };
  const cases: [string, Partial<ServerArgsInput>, string[]][] = [
    ["an llm", {}, []],
    ["an embedding model with its own pooling", { type: "embedding", poolingType: 2 }, ["--embeddings", "--pooling", "cls"]],
    ["an embedding model without pooling gets mean", { type: "embedding" }, ["--embeddings", "--pooling", "mean"]],
    ["the user's pooling wins", { type: "embedding", poolingType: 1, extraArgs: ["--pooling", "last"] }, ["--embeddings", "--pooling", "last"]],
    ["a reranker", { type: "reranking" }, ["--reranking"]],
    ["a vision model", { mmproj: "/m/mmproj.gguf" }, ["--mmproj", "/m/mmproj.gguf"]],
    ["rpc workers", { rpcWorkers: ["127.0.0.1:1", "127.0.0.1:2"] }, ["--rpc", "127.0.0.1:1,127.0.0.1:2", "-ngl", "999"]],
    [
      "rpc workers split by memory",
      { rpcWorkers: ["127.0.0.1:1", "127.0.0.1:2"], tensorSplit: [40, 20] },
      ["--rpc", "127.0.0.1:1,127.0.0.1:2", "-ngl", "999", "--tensor-split", "40,20"],
    ],
    ["a split that does not match the workers is left out", { rpcWorkers: ["127.0.0.1:1"], tensorSplit: [1, 2] }, ["--rpc", "127.0.0.1:1", "-ngl", "999"]],
    ["extra args come last", { extraArgs: ["--threads", "2"] }, ["--threads", "2"]],
  ];
  test.each(cases)("%s", (_, over, tail) => {
    const argv = serverArgv({ ...base, ...over });
    // Loopback only, and the node's key (from a file: arguments are every user's to read).
    expect(argv.slice(0, 13)).toEqual(["/bin/llama-server", "--model", "/m/a.gguf", "--host", "127.0.0.1", "--port", "5000", "--api-key-file", "/state/llama-server.key", "--alias", "a", "--ctx-size", "4096"]);
    expect(argv.slice(13)).toEqual(tail);
  });
});

test("--list-devices output parses into devices; the CPU is always a backend", () => {
  const out = `Available devices:
  Vulkan0: NVIDIA GeForce RTX 4090 (24564 MiB, 23000 MiB free)
  CUDA1: NVIDIA A100 (81920 MiB, 80000 MiB free)
  RPC0: 127.0.0.1:50052 (1000 MiB, 1000 MiB free)
`;
  const devices = parseListDevices(out);
  expect(devices.map((d) => [d.name, d.backend, d.totalBytes])).toEqual([
    ["Vulkan0", "vulkan", 24564 * 2 ** 20],
    ["CUDA1", "cuda", 81920 * 2 ** 20],
    ["RPC0", "rpc", 1000 * 2 ** 20],
  ]);
  expect(parseListDevices("Available devices:\n  (none)\n")).toEqual([]);
  expect(availableBackends([])).toEqual(["cpu"]);
  expect(availableBackends(devices.slice(0, 1))).toEqual(["vulkan", "cpu"]);
});

describe("loadArgs: the node's arguments, then the model's, then the request's; the CPU backend hides accelerators", () => {
  test.each([
    ["all three, in order", "--threads 4", "--batch-size 64", { requestArgs: ["--top-k", "5"] }, ["--threads", "4", "--batch-size", "64", "--top-k", "5"]],
    ["none", undefined, undefined, {}, []],
    ["cpu backend", "--threads 2", undefined, { backend: "cpu" }, ["--threads", "2", "--device", "none"]],
    ["another backend adds nothing", undefined, undefined, { backend: "vulkan" }, []],
  ] as const)("%s", (_, node, model, options, expected) => {
    expect(loadArgs(node, model, options)).toEqual([...expected]);
  });

  test("a clash with the pool's own flags is refused, wherever it comes from", () => {
    expect(() => loadArgs("--port 1", undefined, {})).toThrow(ServerArgsError);
    expect(() => loadArgs(undefined, undefined, { requestArgs: ["--model", "x"] })).toThrow(ServerArgsError);
  });
});

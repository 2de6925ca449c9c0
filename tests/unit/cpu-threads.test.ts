import { describe, expect, test } from "bun:test";
import { placementOf, processesAtOnce, serverThreadArgs, type NodeProcesses, type PlacementInput, type ServerThreadsInput } from "../../pool/cpu-threads.ts";
import { loadThreadArgs } from "../../pool/load-launch.ts";
import { Device } from "../../models/recipe-devices.ts";
import type { ModelInfo } from "../../models/model-store.ts";
import { serverArgv } from "../../pool/server-args.ts";

describe("processesAtOnce: per type, the limit or the models there are; the rpc-server when it may compute", () => {
  const cases: [string, NodeProcesses, number][] = [
    ["one model, limit 1: one process", { perTypeLimit: 1, modelsByType: { llm: 1 }, rpcServer: false }, 1],
    ["three llms, limit 1: still one at a time", { perTypeLimit: 1, modelsByType: { llm: 3 }, rpcServer: false }, 1],
    ["two llms, limit 2", { perTypeLimit: 2, modelsByType: { llm: 2 }, rpcServer: false }, 2],
    ["one llm, limit 4: the models bound it", { perTypeLimit: 4, modelsByType: { llm: 1 }, rpcServer: false }, 1],
    ["an llm and an embedding model, limit 1: one slot per type", { perTypeLimit: 1, modelsByType: { llm: 2, embedding: 1 }, rpcServer: false }, 2],
    ["no limit: every model", { perTypeLimit: -1, modelsByType: { llm: 3, reranking: 1 }, rpcServer: false }, 4],
    ["a CPU rpc-server lending to a split counts", { perTypeLimit: 1, modelsByType: { llm: 1 }, rpcServer: true }, 2],
    ["no models yet: the one starting", { perTypeLimit: 1, modelsByType: {}, rpcServer: false }, 1],
    ["no models, the rpc-server alone (a pure worker): every core for it", { perTypeLimit: 1, modelsByType: {}, rpcServer: true }, 1],
  ];
  test.each(cases)("%s", (_, input, want) => expect(processesAtOnce(input)).toBe(want));
});

describe("placementOf: all weights on devices, or some on the CPU", () => {
  const GiB = 2 ** 30;
  const base: PlacementInput = { split: false, gpu: false, needBytes: GiB, gpuBytes: 0, args: [] };
  const cases: [string, Partial<PlacementInput>, "cpu" | "offloaded"][] = [
    ["a CPU node", {}, "cpu"],
    ["a GPU with room for it", { gpu: true, gpuBytes: 8 * GiB }, "offloaded"],
    ["larger than the GPUs: layers stay on the CPU", { gpu: true, needBytes: 9 * GiB, gpuBytes: 8 * GiB }, "cpu"],
    ["split over RPC devices (-ngl 999)", { split: true }, "offloaded"],
    ["a load on the CPU (--device none)", { gpu: true, gpuBytes: 8 * GiB, args: ["--device", "none"] }, "cpu"],
    ["-dev=none", { gpu: true, gpuBytes: 8 * GiB, args: ["-dev=none"] }, "cpu"],
    ["-ngl 0 keeps every layer on the CPU", { gpu: true, gpuBytes: 8 * GiB, args: ["-ngl", "0"] }, "cpu"],
    ["--n_gpu_layers 0 (llama.cpp reads _ as -)", { split: true, args: ["--n_gpu_layers", "0"] }, "cpu"],
    ["-ngl 20 with room: fine", { gpu: true, gpuBytes: 8 * GiB, args: ["-ngl", "20", "--device", "Vulkan0"] }, "offloaded"],
  ];
  test.each(cases)("%s", (_, over, want) => expect(placementOf({ ...base, ...over })).toBe(want));
});

describe("serverThreadArgs: a share of the cores, no polling when several processes may run", () => {
  const base: ServerThreadsInput = { policy: "share", cores: 2, processes: 2, placement: "cpu", userArgs: [] };
  const cases: [string, Partial<ServerThreadsInput>, string][] = [
    ["one process: llama.cpp's own (every core, polling)", { processes: 1 }, ""],
    ["policy all: llama.cpp's own however many run", { policy: "all", processes: 4 }, ""],
    ["2 cores, 2 processes", {}, "-t 1 -tb 1 --poll 0"],
    ["16 cores, 3 processes: rounded down", { cores: 16, processes: 3 }, "-t 5 -tb 5 --poll 0"],
    ["more processes than cores: one thread each", { cores: 2, processes: 5 }, "-t 1 -tb 1 --poll 0"],
    ["offloaded: few threads", { cores: 16, processes: 2, placement: "offloaded" }, "-t 2 -tb 2 --poll 0"],
    ["offloaded on a small share: the share", { cores: 2, processes: 2, placement: "offloaded" }, "-t 1 -tb 1 --poll 0"],
    ["offloaded alone: llama.cpp's own", { cores: 16, processes: 1, placement: "offloaded" }, ""],
    ["the operator's --threads wins (and -tb follows it)", { userArgs: ["--threads", "4"] }, "--poll 0"],
    ["the operator's -t=3 wins", { userArgs: ["-t=3"] }, "--poll 0"],
    ["the operator's -tb alone: -t still shared", { userArgs: ["-tb", "2"] }, "-t 1 --poll 0"],
    ["the operator's --threads_batch (llama.cpp reads _ as -)", { userArgs: ["--threads_batch", "2"] }, "-t 1 --poll 0"],
    ["the operator's --poll wins", { userArgs: ["--poll", "50"] }, "-t 1 -tb 1"],
    ["a word that reads as -t anywhere counts as the operator's: llama.cpp's default is the safe side", { userArgs: ["--system-prompt", "-t"] }, "--poll 0"],
  ];
  test.each(cases)("%s", (_, over, want) => expect(serverThreadArgs({ ...base, ...over }).join(" ")).toBe(want));
});


describe("the launch", () => {
  const model = (over: Partial<ModelInfo> = {}) => ({ name: "m", path: "/models/m.gguf", type: "llm", devices: Device.CPU, sizeBytes: 2 ** 30, facts: undefined, ...over }) as ModelInfo;
  const cpu = { policy: "share" as const, cores: 4, processes: 2, gpuBytes: 0 };

  test("a CPU model gets its share; a GPU model that fits, few threads; one too large, its share", () => {
    expect(loadThreadArgs({ model: model(), extraArgs: [], split: { endpoints: [] }, cpu }, 512)).toEqual(["-t", "2", "-tb", "2", "--poll", "0"]);
    const gpu = { ...cpu, cores: 16, gpuBytes: 8 * 2 ** 30 };
    expect(loadThreadArgs({ model: model({ devices: Device.GPU }), extraArgs: [], split: { endpoints: [] }, cpu: gpu }, 512)).toEqual(["-t", "2", "-tb", "2", "--poll", "0"]);
    expect(loadThreadArgs({ model: model({ devices: Device.GPU, sizeBytes: 9 * 2 ** 30 }), extraArgs: [], split: { endpoints: [] }, cpu: gpu }, 512)).toEqual(["-t", "8", "-tb", "8", "--poll", "0"]);
  });

  test("no share given: nothing added", () => {
    expect(loadThreadArgs({ model: model(), extraArgs: [], split: { endpoints: [] } }, 512)).toEqual([]);
  });

  test("the share comes before the free-form arguments, so theirs would still be last", () => {
    const argv = serverArgv({ binary: "/b", modelPath: "/m", mmproj: undefined, alias: "m", type: "llm", poolingType: undefined, port: 1, apiKeyFile: "/k", ctxSize: 0, threadArgs: ["-t", "1"], extraArgs: ["--parallel", "1"] });
    expect(argv.slice(-4)).toEqual(["-t", "1", "--parallel", "1"]);
  });
});

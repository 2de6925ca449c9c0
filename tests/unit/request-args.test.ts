import { describe, expect, test } from "bun:test";
import { MAX_REQUEST_ARGS_CHARS, parseRequestArgs } from "../../pool/request-args.ts";
import { afterFailedStart } from "../../pool/load-retry.ts";
import { mayBeMemory, type LoadOptions } from "../../pool/pool-types.ts";

const accept = (text: string) => {
  const r = parseRequestArgs(text);
  if (!r.ok) throw new Error(r.error);
  return [...r.args];
};
const refuse = (text: string) => {
  const r = parseRequestArgs(text);
  if (r.ok) throw new Error(`accepted: ${r.args.join(" ")}`);
  return r.error;
};

describe("accepted: tuning flags with checked values, in canonical --flag value words", () => {
  const cases: [string, string[]][] = [
    ["", []],
    ["--threads 4", ["--threads", "4"]],
    ["-t 2 -tb 2", ["--threads", "2", "--threads-batch", "2"]],
    ["--threads=4", ["--threads", "4"]],
    ["-b=64 -ub=32", ["--batch-size", "64", "--ubatch-size", "32"]],
    ["--threads -1", ["--threads", "-1"]],
    ["-np 4 -cb", ["--parallel", "4", "--cont-batching"]],
    ["--parallel -1", ["--parallel", "-1"]],
    ["--no-cont-batching --cache-reuse 256 -n 128 --keep -1", ["--no-cont-batching", "--cache-reuse", "256", "--n-predict", "128", "--keep", "-1"]],
    ["-ngl 99 -sm layer -mg 0", ["--gpu-layers", "99", "--split-mode", "layer", "--main-gpu", "0"]],
    ["--n-gpu-layers auto", ["--gpu-layers", "auto"]],
    ["-ctk q8_0 -ctv=q4_0 -fa on", ["--cache-type-k", "q8_0", "--cache-type-v", "q4_0", "--flash-attn", "on"]],
    ["--load-mode mmap+mlock", ["--load-mode", "mmap+mlock"]],
    ["--defrag-thold 0.1 --rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 4096", ["--defrag-thold", "0.1", "--rope-scaling", "yarn", "--rope-scale", "4", "--yarn-orig-ctx", "4096"]],
    ["--temp 0.7 --top-k 40 --top-p .9 --min-p 0.05 --repeat-penalty 1.1 --seed 42", ["--temp", "0.7", "--top-k", "40", "--top-p", ".9", "--min-p", "0.05", "--repeat-penalty", "1.1", "--seed", "42"]],
    ["--seed -1", ["--seed", "-1"]],
    ["--seed 4294967295", ["--seed", "4294967295"]],
    ["--jinja --chat-template chatml --reasoning-format deepseek --reasoning-budget 0", ["--jinja", "--chat-template", "chatml", "--reasoning-format", "deepseek", "--reasoning-budget", "0"]],
    ["--no-webui --metrics --pooling cls", ["--no-webui", "--metrics", "--pooling", "cls"]],
    ["--cache_reuse 16", ["--cache-reuse", "16"]],
    ['--threads "4"', ["--threads", "4"]],
  ];
  test.each(cases)("%p", (text, args) => expect(accept(text)).toEqual(args));
});

describe("refused, naming the flag", () => {
  const cases: [string, string, string][] = [
    // the command execution, and the other holes the blocklist let through
    [`--mcp-servers-json '{"mcpServers":{"x":{"command":"sh","args":["-c","id > /tmp/x"]}}}'`, "may not contain --mcp-servers-json:", "the operator's"],
    ["--mcp_servers_json {}", "may not contain --mcp_servers_json:", "the operator's"],
    ["--mcp-servers-config /tmp/x.json", "may not contain --mcp-servers-config:", "tuning flags"],
    ["-mm /etc/passwd", "may not contain -mm:", "tuning flags"],
    ["-mmu http://127.0.0.1/x", "may not contain -mmu:", "tuning flags"],
    ["-md /etc/passwd", "may not contain -md:", "draft_model"],
    ["--tools all", "may not contain --tools:", "tuning flags"],
    ["--agent", "may not contain --agent:", "tuning flags"],
    ["--media-path /", "may not contain --media-path:", "tuning flags"],
    ["--ssl-key-file /k", "may not contain --ssl-key-file:", "tuning flags"],
    ["--api-prefix /x", "may not contain --api-prefix:", "tuning flags"],
    ["--log-prompts-dir /tmp", "may not contain --log-prompts-dir:", "tuning flags"],
    ["--webui", "may not contain --webui:", "tuning flags"],
    ["--props", "may not contain --props:", "tuning flags"],
    ["--lora x.gguf", "may not contain --lora:", "tuning flags"],
    ["--grammar-file /etc/passwd", "may not contain --grammar-file:", "tuning flags"],
    ["-hff x", "may not contain -hff:", "tuning flags"],
    ["--cors-origins http://evil.example", "may not contain --cors-origins:", "tuning flags"],
    ["--chat-template-file /etc/passwd", "may not contain --chat-template-file:", "built-in template"],
    ["--chat-template-kwargs {}", "may not contain --chat-template-kwargs:", "JSON"],
    ["-ts 3,1", "may not contain -ts:", "tensor split"],
    ["--mlock", "may not contain --mlock:", "--load-mode mlock"],
    // the pool's own flags keep their reasons (and the existing message)
    ["--port 8080", "may not contain --port:", "the pool picks the port"],
    ["--host=0.0.0.0", "may not contain --host:", "127.0.0.1"],
    ["-m /etc/passwd", "may not contain -m:", "model_name"],
    ["--rpc 10.0.0.1:50052", "may not contain --rpc:", "the mesh decides"],
    ["--api-key k", "may not contain --api-key:", "API keys"],
    ["-c 100", "may not contain -c:", "ctx_size"],
    ["--slot-save-path /tmp", "may not contain --slot-save-path:", "the node keeps saved slots"],
    // a refused flag after allowed ones
    ["--threads 2 --model-url http://x", "may not contain --model-url:", "models dir"],
  ];
  test.each(cases)("%p", (text, named, why) => {
    const error = refuse(text);
    expect(error).toContain(named);
    expect(error).toContain(why);
  });
});

describe("refused values", () => {
  const cases: [string, string][] = [
    ["--threads", "--threads needs a value: an integer from -1 to 1024"],
    ["--threads four", '--threads expects an integer from -1 to 1024, got "four"'],
    ["--threads 4.5", "got \"4.5\""],
    ["--threads 0x10", 'got "0x10"'],
    ["--threads 100000", 'got "100000"'],
    ["-t --mcp-servers-json", 'got "--mcp-servers-json"'],
    ["--parallel 0", '--parallel expects an integer from 1 to 256 or -1, got "0"'],
    ["-ngl lots", 'got "lots"'],
    ["-ctk q3_k", "-ctk expects one of f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1"],
    ["-fa true", "-fa expects one of on, off, auto"],
    ["--split-mode diagonal", 'got "diagonal"'],
    ["--top-p 2", '--top-p expects a number from 0 to 1, got "2"'],
    ["--temp NaN", 'got "NaN"'],
    ["--temp Infinity", 'got "Infinity"'],
    ["--temp 1e400", 'got "1e400"'],
    ["--seed 4294967296", 'got "4294967296"'],
    ["--chat-template '{% for m in messages %}{{ m.content }}{% endfor %}'", "--chat-template expects a built-in name"],
    ["--metrics=yes", '--metrics takes no value, got "yes"'],
    ["--jinja=/etc/passwd", "--jinja takes no value"],
    ["4", 'unexpected "4"; expected a flag'],
    ["--threads 4 extra", 'unexpected "extra"'],
    ["-", 'unexpected "-"'],
    ["-- --threads 4", 'unexpected "--"'],
  ];
  test.each(cases)("%p", (text, message) => expect(refuse(text)).toContain(message));
});

describe("shell syntax is refused or stays literal; nothing is expanded", () => {
  test.each(["-t 1; id", "-t 1 | sh", "-t 1 && id", "-t 1 > /tmp/x", "-t $(id)", "-t 1 # c", "-t *"])("%p is shell syntax", (text) => {
    expect(refuse(text)).toContain("not shell syntax");
  });
  test.each([
    ["-t $HOME", '"$HOME"'],
    ["-t ${N}", '"$N"'],
    ["-t `id`", '"`id`"'],
  ])("%p stays as written and is a bad value", (text, shown) => expect(refuse(text)).toContain(`got ${shown}`));
});

describe("bounds on what a request may send", () => {
  test("too long", () => expect(refuse(`--threads 4 ${" ".repeat(MAX_REQUEST_ARGS_CHARS)}`)).toContain(`at most ${MAX_REQUEST_ARGS_CHARS}`));
  test("too many words", () => expect(refuse("--metrics ".repeat(65))).toContain("at most 64"));
});

describe("mayBeMemory: which failed starts get the nuclear retry", () => {
  const cases: [string, { requestArgs: boolean; error: string }, boolean][] = [
    ["an operator load that exited while loading", { requestArgs: false, error: "llama-server for a exited while loading (code 1)\nfailed to allocate buffer" }, true],
    ["an operator load that was not ready in time", { requestArgs: false, error: "llama-server for a was not ready within 60 s" }, true],
    ["a load with request args, whatever the error", { requestArgs: true, error: "llama-server for a exited while loading (code 1)\nfailed to allocate buffer" }, false],
    ["an operator argument llama-server refused", { requestArgs: false, error: 'exited while loading\nerror while handling argument "--threads": stoi' }, false],
    ["an operator flag llama-server does not know", { requestArgs: false, error: "exited while loading\nerror: invalid argument: --mlock" }, false],
    ["a models.json draft llama-server cannot open", { requestArgs: false, error: "exited while loading (code 1)\nsrv    load_model: failed to load draft model, '/m/d.gguf'" }, false],
  ];
  test.each(cases)("%s", (_, failure, retry) => expect(mayBeMemory(failure)).toBe(retry));
});

describe("afterFailedStart: the nuclear retry or the error", () => {
  const checked = (text: string) => {
    const r = parseRequestArgs(text);
    if (!r.ok) throw new Error(r.error);
    return r.args;
  };
  const OOM = "llama-server for a exited while loading (code 1)\nfailed to allocate buffer";
  const cases: [string, LoadOptions, string[], { evict: string[] } | { error: string }][] = [
    ["an operator load, idle servers: evict them and retry", {}, ["b", "c"], { evict: ["b", "c"] }],
    ["an operator load, nothing idle: fail", {}, [], { error: "; check --llamacpp-args and models.json" }],
    ["request args: fail, evicting nothing", { requestArgs: checked("--threads 2") }, ["b"], { error: 'with llamacpp_args "--threads 2"; nothing was unloaded' }],
    ["a request's draft_model: fail, evicting nothing", { draftModel: "small" }, ["b"], { error: 'with draft_model "small"; nothing was unloaded' }],
  ];
  test.each(cases)("%s", (_, options, idle, want) => {
    const got = afterFailedStart("a", options, OOM, idle);
    if ("evict" in want) expect(got).toEqual({ retry: true, evict: want.evict });
    else expect(!got.retry && got.message).toContain(want.error);
  });
});

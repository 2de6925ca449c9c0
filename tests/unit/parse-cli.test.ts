import { describe, expect, test } from "bun:test";
import { defaultConfig, type Config } from "../../config/config.ts";
import { NODE_FLAGS } from "../../config/flags.ts";
import { helpText } from "../../config/help.ts";
import { encodeJoinToken } from "../../mesh/join-token.ts";
import { joinDashValues, parseCli, UsageError, type Command } from "../../config/parse-cli.ts";

const HOME = "/home/u";
const token = { addr: { nodeId: "n1", addresses: ["127.0.0.1:4433"] }, secret: new Uint8Array(32).fill(7) };
const tokenText = encodeJoinToken(token);
const base = defaultConfig(HOME);
const node = (over: Partial<Config>): Command => ({ kind: "node", config: { ...base, ...over } });
/** Sources are checked by their own table below. */
const withoutSources = (c: Command): Command => ("config" in c ? ({ ...c, config: { ...c.config, settingSources: {} } } as Command) : c);

describe("parseCli: commands and flags", () => {
  const cases: [argv: string[], expected: Command][] = [
    [[], node({})],
    [["--help"], { kind: "help" }],
    [["-h"], { kind: "help" }],
    [["--version"], { kind: "version" }],
    [["status", "--help"], { kind: "help" }],
    [["--port", "8080", "--listen", "0.0.0.0"], node({ port: 8080, listen: "0.0.0.0" })],
    [["--model", "a.gguf", "--model", "b"], node({ models: ["a.gguf", "b"] })],
    [["--max-loaded-models", "-1"], node({ maxLoadedModels: -1 })],
    [["--max-loaded-models=3"], node({ maxLoadedModels: 3 })],
    [["--idle-unload", "0"], node({ idleUnloadMs: 0 })],
    [["--affinity", "off"], node({ affinity: "off" })],
    [["--replicas", "off", "--replica-idle", "3s"], node({ replicas: "off", replicaIdleMs: 3000 })],
    [["--replica-idle", "0"], node({ replicaIdleMs: 0 })],
    [["--ctx-size", "0", "--load-timeout", "5s", "--max-body-size", "1MiB"], node({ ctxSize: 0, loadTimeoutMs: 5000, maxBodyBytes: 2 ** 20 })],
    [["--llamacpp-args", "--threads 2 --parallel 1"], node({ llamacppArgs: "--threads 2 --parallel 1" })],
    [["--vram", "8GiB"], node({ vramBytes: 8 * 2 ** 30 })],
    [["--relay", "disabled", "--quic-bind", "127.0.0.1:0"], node({ relay: "disabled", quicBind: { host: "127.0.0.1", port: 0 } })],
    [["--relay", "https://relay.example.org/", "--relay", "https://relay2.example.org", "--transport", "iroh1"], node({ relay: ["https://relay.example.org", "https://relay2.example.org"], transport: "iroh1" })],
    [["--relay", "https://relay.example.org", "--relay", "https://relay.example.org/"], node({ relay: ["https://relay.example.org"] })],
    [["--ollama-listen", "127.0.0.1:11434"], node({ ollamaListen: { host: "127.0.0.1", port: 11434 } })],
    [["--ollama-listen", "[::1]:0"], node({ ollamaListen: { host: "::1", port: 0 } })],
    [["--api-key", "k1", "--api-key", "k2", "--log-format", "json"], node({ apiKeys: ["k1", "k2"], logFormat: "json" })],
    [["--join", tokenText, "--state-dir", "/s", "--models-dir", "/m", "--llama-dir", "/l"], node({ join: token, stateDir: "/s", modelsDir: "/m", llamaDir: "/l" })],
    [["status"], { kind: "status", config: base, json: false }],
    [["status", "--json", "--port", "1234"], { kind: "status", config: { ...base, port: 1234 }, json: true }],
    [["token"], { kind: "token", config: base }],
    [["token", "--state-dir", "/s"], { kind: "token", config: { ...base, stateDir: "/s" } }],
    [["--cors-origin", "http://localhost:3000", "--cors-origin", "https://App.Example/"], node({ corsOrigins: ["http://localhost:3000", "https://app.example"] })],
    [["--cors-origin", "app://obsidian.md", "--cors-origin", "chrome-extension://abcdef"], node({ corsOrigins: ["app://obsidian.md", "chrome-extension://abcdef"] })],
    [["--idle-timeout", "2s", "--max-connections", "20"], node({ idleTimeoutS: 2, maxConnections: 20 })],
    [["--idle-timeout", "4m15s"], node({ idleTimeoutS: 255 })],
    [["--max-queue", "8"], node({ maxQueue: 8 })],
    [["--max-queue=0"], node({ maxQueue: 0 })],
    [["llama"], { kind: "llama", action: "show", config: base }],
    [["llama", "build"], { kind: "llama", action: "build", config: base, source: undefined }],
    [["llama", "build", "--flavor", "vulkan", "--source", "/src/llama.cpp"], { kind: "llama", action: "build", config: { ...base, llamaFlavor: "vulkan" }, source: "/src/llama.cpp" }],
    [["--llama-release", "b7000", "--llama-flavor", "cpu", "--llama-mirror", "http://127.0.0.1:8/"], node({ llamaRelease: "b7000", llamaFlavor: "cpu", llamaMirror: "http://127.0.0.1:8" })],
    [
      ["service", "install", "--user", "--model", "m.gguf"],
      { kind: "service", action: "install", user: true, config: { ...base, models: ["m.gguf"] }, nodeArgs: ["--model", "m.gguf"] },
    ],
    [["service", "uninstall"], { kind: "service", action: "uninstall", user: false, config: base, nodeArgs: [] }],
    [["pull", "bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M"], { kind: "pull", config: base, ref: "bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M", name: undefined }],
    [["pull", "hf.co/org/repo:Q8_0", "--name", "small", "--models-dir", "/m"], { kind: "pull", config: { ...base, modelsDir: "/m" }, ref: "hf.co/org/repo:Q8_0", name: "small" }],
    [["models"], { kind: "models", config: base, json: false }],
    [["models", "--json", "--port", "1234"], { kind: "models", config: { ...base, port: 1234 }, json: true }],
    [["rm", "hf.co/org/repo:Q8_0"], { kind: "rm", config: base, name: "hf.co/org/repo:Q8_0" }],
    [
      ["service", "install", "--model", "install"],
      { kind: "service", action: "install", user: false, config: { ...base, models: ["install"] }, nodeArgs: ["--model", "install"] },
    ],
  ];
  test.each(cases)("%p", (argv, expected) => {
    expect(withoutSources(parseCli(argv, HOME))).toEqual(expected);
  });
});

describe("parseCli: bad command lines name the problem", () => {
  const cases: [argv: string[], message: string][] = [
    [["--port", "abc"], '--port: expected a port number 0-65535, got "abc"'],
    [["--port"], "--port <value>' argument missing"],
    [["--bogus"], "Unknown option '--bogus'"],
    [["--max-loaded-models", "0"], "--max-loaded-models: expected a whole number >= 1, or -1"],
    [["--idle-unload", "soon"], "--idle-unload: expected a duration"],
    [["--replicas", "yes"], "--replicas: expected one of on, off"],
    [["--replica-idle", "later"], "--replica-idle: expected a duration"],
    [["--vram", "big"], "--vram: expected a size"],
    [["--relay", "maybe"], '--relay: expected one of default, disabled or a relay\'s http(s) URL, got "maybe"'],
    [["--relay", "ftp://relay.example.org"], "--relay: expected one of default, disabled or a relay's http(s) URL"],
    [["--relay", "https://"], "--relay: expected a URL"],
    [["--relay", "disabled", "--relay", "https://relay.example.org"], '--relay: a relay URL (https://relay.example.org) cannot be given with "disabled"'],
    [["--relay", "https://relay.example.org", "--relay", "default"], '--relay: "default" cannot be given with relay URLs (https://relay.example.org)'],
    [["--transport", "iroh2"], "--transport: expected one of iroh035, iroh1"],
    [["--affinity", "sometimes"], "--affinity: expected one of on, off"],
    [["--log-format", "xml"], "--log-format: expected one of text, json"],
    [["--quic-bind", "nowhere"], "--quic-bind: expected HOST:PORT"],
    [["--ollama-listen", "11434"], "--ollama-listen: expected HOST:PORT"],
    [["--model", ""], "--model: expected a value"],
    [["--join", "hello"], '--join: not a mesh join token (it should start with "mesh1")'],
    [["--join", "mesh1!!!"], "--join: not a mesh join token"],
    [["--ctx-size", "-5"], "--ctx-size: expected a whole number >= 0"],
    [["frobnicate"], 'unknown command "frobnicate"; commands: status, open, token, roster, guests, service, llama'],
    [["token", "extra"], "Unexpected argument 'extra'"],
    [["token", "--json"], "Unknown option '--json'"],
    [["--cors-origin", "*"], "--cors-origin: expected an origin like https://app.example"],
    [["--cors-origin", "null"], "--cors-origin: expected an origin"],
    [["--cors-origin", "https://app.example/path"], "an origin has no path"],
    [["--cors-origin", "http://localhost:80"], "no path, query or default port"],
    [["--cors-origin", "file:///tmp/x.html"], "--cors-origin: expected an origin"],
    [["--cors-origin", "app://user:pw@obsidian.md"], "--cors-origin: expected an origin"],
    [["--idle-timeout", "0"], '--idle-timeout: expected whole seconds from 1s to 255s, got "0"'],
    [["--idle-timeout", "256s"], "--idle-timeout: expected whole seconds from 1s to 255s"],
    [["--idle-timeout", "1500ms"], "--idle-timeout: expected whole seconds"],
    [["--max-connections", "0"], "--max-connections: expected a whole number >= 1"],
    [["--max-queue", "-1"], '--max-queue: expected a whole number from 0 to 100000, got "-1"'],
    [["--max-queue", "100001"], "--max-queue: expected a whole number from 0 to 100000"],
    [["status", "--user"], "Unknown option '--user'"],
    [["service"], "usage: mesh service install|uninstall"],
    [["llama", "rebuild"], "usage: mesh llama [build"],
    [["llama", "build", "--flavor", "opencl"], "--flavor: expected one of cpu, vulkan, rocm, metal, cuda"],
    [["llama", "--source", "x"], "--flavor and --source go with `mesh llama build`"],
    [["--llama-flavor", "tpu"], "--llama-flavor: expected one of"],
    [["--llama-mirror", "ftp://x"], "--llama-mirror: expected an http or https URL"],
    [["service", "restart"], "usage: mesh service install|uninstall"],
    [["--port", "1", "extra"], "Unexpected argument 'extra'"],
    [["pull"], "usage: mesh pull REF [--name NAME]"],
    [["pull", "a/b", "c/d"], "usage: mesh pull REF"],
    [["pull", "a/b", "--name", " "], "--name: give the model a name"],
    [["rm"], "usage: mesh rm NAME"],
    [["models", "extra"], "Unexpected argument 'extra'"],
    [["rm", "x", "--name", "y"], "Unknown option '--name'"],
  ];
  test.each(cases)("%p", (argv, message) => {
    expect(() => parseCli(argv, HOME)).toThrow(UsageError);
    expect(() => parseCli(argv, HOME)).toThrow(message);
  });
});

describe("joinDashValues", () => {
  const flags = new Set(["max-loaded-models", "port", "llamacpp-args"]);
  const dash = new Set(["llamacpp-args"]);
  const cases: [string[], string[]][] = [
    [["--max-loaded-models", "-1"], ["--max-loaded-models=-1"]],
    [["--max-loaded-models", "2"], ["--max-loaded-models", "2"]],
    [["--json", "-1"], ["--json", "-1"]],
    [["--port", "-h"], ["--port", "-h"]],
    [["--llamacpp-args", "--threads 1", "--port", "1"], ["--llamacpp-args=--threads 1", "--port", "1"]],
    [["--llamacpp-args", "-t 2"], ["--llamacpp-args=-t 2"]],
  ];
  test.each(cases)("%p", (input, out) => expect(joinDashValues(input, flags, dash)).toEqual(out));
});

test("--help has one line for every flag and command", () => {
  const help = helpText();
  for (const f of NODE_FLAGS) expect(help).toMatch(new RegExp(f.boolean ? `^  --${f.name} +\\S.*$` : `^  --${f.name} \\S+ +\\S.*$`, "m"));
  for (const word of ["mesh status", "mesh token", "mesh service install|uninstall", "mesh llama", "--json", "--user", "--version", "--help"]) {
    expect(help).toContain(word);
  }
});

describe("settings: flags > MESH_* env > config.toml in the state dir > defaults", () => {
  const io = (env: Record<string, string>, file?: Record<string, unknown>) => ({
    env,
    readConfigFile: (stateDir: string) => (file ? { path: `${stateDir}/config.toml`, values: file } : undefined),
  });
  const config = (argv: string[], env: Record<string, string>, file?: Record<string, unknown>) => {
    const cmd = parseCli(argv, HOME, io(env, file));
    if (cmd.kind !== "node") throw new Error(cmd.kind);
    return cmd.config;
  };
  test.each<[string, string[], Record<string, string>, Record<string, unknown> | undefined, Partial<Config>, Record<string, string>]>([
    ["defaults", [], {}, undefined, { port: 9337 }, { port: "default" }],
    ["the file over defaults", [], {}, { port: 9400, model: ["a", "b"], insecure: true }, { port: 9400, models: ["a", "b"], insecure: true }, { port: "file", model: "file", insecure: "file" }],
    ["env over the file", [], { MESH_PORT: "9500", MESH_API_KEY: "k1, k2" }, { port: 9400, "api-key": "kf" }, { port: 9500, apiKeys: ["k1", "k2"] }, { port: "env", "api-key": "env" }],
    ["flags over env", ["--port", "9600", "--api-key", "kc"], { MESH_PORT: "9500", MESH_API_KEY: "k1" }, { port: 9400 }, { port: 9600, apiKeys: ["kc"] }, { port: "flag", "api-key": "flag" }],
    ["a list from the flags replaces the env's, not adds to it", ["--model", "x"], { MESH_MODEL: "y,z" }, undefined, { models: ["x"] }, { model: "flag" }],
    ["booleans from env", [], { MESH_INSECURE: "yes" }, undefined, { insecure: true }, { insecure: "env" }],
    ["the queue bound from env", [], { MESH_MAX_QUEUE: "4" }, undefined, { maxQueue: 4 }, { "max-queue": "env" }],
    ["the Ollama listener from env", [], { MESH_OLLAMA_LISTEN: "127.0.0.1:11434" }, undefined, { ollamaListen: { host: "127.0.0.1", port: 11434 } }, { "ollama-listen": "env" }],
    ["the Ollama listener from the file", [], {}, { "ollama-listen": "127.0.0.1:11435" }, { ollamaListen: { host: "127.0.0.1", port: 11435 } }, { "ollama-listen": "file" }],
    ["CORS origins from env", [], { MESH_CORS_ORIGIN: "http://localhost:3000, https://app.example" }, undefined, { corsOrigins: ["http://localhost:3000", "https://app.example"] }, { "cors-origin": "env" }],
    ["CORS origins from the file", [], {}, { "cors-origin": ["https://app.example"], "idle-timeout": "45s", "max-connections": 64 }, { corsOrigins: ["https://app.example"], idleTimeoutS: 45, maxConnections: 64 }, { "cors-origin": "file", "idle-timeout": "file", "max-connections": "file" }],
    ["an empty variable counts as unset", [], { MESH_PORT: "" }, { port: 9400 }, { port: 9400 }, { port: "file" }],
  ])("%s", (_, argv, env, file, expected, sources) => {
    const c = config(argv, env, file);
    expect(c).toMatchObject(expected);
    expect(c.settingSources).toMatchObject(sources);
  });
  test("the file is read from the state dir the flags or env name", () => {
    const seen: string[] = [];
    parseCli(["--state-dir", "/s1"], HOME, { env: {}, readConfigFile: (d) => void seen.push(d) });
    parseCli([], HOME, { env: { MESH_STATE_DIR: "/s2" }, readConfigFile: (d) => void seen.push(d) });
    expect(seen).toEqual(["/s1", "/s2"]);
  });
  test.each<[string, Record<string, string>, Record<string, unknown> | undefined, string]>([
    ["a bad env value names the variable", { MESH_PORT: "eighty" }, undefined, 'MESH_PORT: expected a port number 0-65535, got "eighty"'],
    ["a bad file value names the key and file", {}, { port: "x" }, 'port in /home/u/.mesh/config.toml: expected a port number'],
    ["an unknown key (a typo) is refused", {}, { prot: 1 }, 'unknown setting "prot"'],
    ["a list where one value goes", {}, { port: [1, 2] }, "expected one value"],
    ["a table where a value goes", {}, { model: { a: 1 } }, "expected a value or a list of values"],
  ])("%s", (_, env, file, message) => {
    expect(() => parseCli([], HOME, io(env, file))).toThrow(UsageError);
    expect(() => parseCli([], HOME, io(env, file))).toThrow(message);
  });
});

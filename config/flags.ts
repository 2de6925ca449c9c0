/**
 * Every flag of the node, once: its name, what it takes, one line of help and how its text becomes
 * part of the Config. The parser and `--help` are both generated from this table.
 */
import { decodeJoinToken } from "../mesh/join-token.ts";
import { RELAY_MODES, TRANSPORT_LINES, type RelaySetting } from "../mesh/transport.ts";
import { LOG_FORMATS, type Config } from "./config.ts";
import {
  parseChoice,
  parseCount,
  parsePositive,
  parseDuration,
  parseHostPort,
  parseModelLimit,
  parseNonEmpty,
  parsePort,
  parseSize,
  parseUrl,
  parseBoolean,
  parseIdleTimeout,
  parseMaxQueue,
  parseOrigin,
  parseHostId,
  parseMediaHosts,
} from "./values.ts";
import { FLAVORS } from "../llama/flavor.ts";
import { LLAMA_RELEASE } from "../llama/pin.ts";
import { parseStoreList } from "../models/stores/stores.ts";
import { THREADS_POLICIES } from "../pool/cpu-threads.ts";

export interface FlagSpec {
  name: string;
  /** Placeholder shown in help, e.g. `<port>`. */
  arg: string;
  help: string;
  /** Repeatable: every occurrence is kept. */
  multiple: boolean;
  /** Its value may start with a dash (`--llamacpp-args "--threads 4"`). */
  dashValue?: boolean;
  /** Takes no value (`--insecure`). */
  boolean?: boolean;
  /** Its value is a credential: `mesh service install` keeps it out of the unit (and so out of `ps`). */
  secret?: boolean;
  /** Applies one occurrence's text to the config; throws with what was expected. */
  apply: (config: Config, text: string) => void;
}

function flag<K extends keyof Config>(
  name: string,
  arg: string,
  key: K,
  parse: (text: string) => Config[K],
  help: string,
): FlagSpec {
  return { name, arg, help, multiple: false, apply: (c, t) => void (c[key] = parse(t)) };
}

function listFlag(name: string, arg: string, key: "models" | "apiKeys" | "corsOrigins" | "hosts", help: string, parse: (text: string) => string = parseNonEmpty): FlagSpec {
  return { name, arg, help, multiple: true, apply: (c, t) => void c[key].push(parse(t)) };
}

/**
 * One `--relay` value onto what earlier ones said: a mode, or relay URLs (the first replaces the
 * default, more add to it); a mode and URLs together are refused.
 */
export function addRelay(current: RelaySetting, text: string): RelaySetting {
  if ((RELAY_MODES as readonly string[]).includes(text)) {
    if (Array.isArray(current)) throw new Error(`"${text}" cannot be given with relay URLs (${current.join(", ")})`);
    return text as (typeof RELAY_MODES)[number];
  }
  if (!/^https?:\/\//i.test(text)) throw new Error(`expected one of ${RELAY_MODES.join(", ")} or a relay's http(s) URL, got "${text}"`);
  const url = parseUrl(text);
  if (current === "disabled") throw new Error(`a relay URL (${url}) cannot be given with "disabled"`);
  return Array.isArray(current) ? [...new Set([...current, url])] : [url];
}

export const NODE_FLAGS: readonly FlagSpec[] = [
  flag("port", "<port>", "port", parsePort, "API port (default 9337; 0 picks a free one)"),
  flag("listen", "<host>", "listen", parseNonEmpty, "address the API listens on (default 127.0.0.1)"),
  flag("ollama-listen", "<host:port>", "ollamaListen", parseHostPort, "also serve the API here, e.g. 127.0.0.1:11434 where Ollama's tools look (default: off)"),
  flag("state-dir", "<dir>", "stateDir", parseNonEmpty, "identity, logs and caches (default ~/.mesh)"),
  flag("models-dir", "<dir>", "modelsDir", parseNonEmpty, "where GGUF models live (default ~/.models)"),
  listFlag("model", "<name|path|ref>", "models", "serve this model: a name, a file, or a reference to pull such as org/repo:Q4_K_M (repeatable)"),
  { ...flag("join", "<token>", "join", decodeJoinToken, "join the mesh of the node that printed this token"), secret: true },
  flag("max-loaded-models", "<n>", "maxLoadedModels", parseModelLimit, "models loaded at once per type (default 1; -1 = no limit)"),
  flag("idle-unload", "<duration>", "idleUnloadMs", parseDuration, "unload a model unused this long (default 30m; 0 = never)"),
  flag("load-timeout", "<duration>", "loadTimeoutMs", parseDuration, "how long a request waits for its model's slot before 503 (default 2m)"),
  flag("ctx-size", "<n>", "ctxSize", parseCount, "context size models load with (default 4096; 0 = the model's own)"),
  { ...flag("llamacpp-args", "<args>", "llamacppArgs", (t) => t, 'extra arguments for every llama-server, e.g. "--threads 4"'), dashValue: true },
  flag("max-body-size", "<size>", "maxBodyBytes", parseSize, "largest request body the API accepts (default 64MiB)"),
  flag("rpc-threads", "<n>", "rpcThreads", parsePositive, "threads of the rpc-server this node offers the mesh (default: all cores)"),
  flag("threads-policy", "<share|all>", "threadsPolicy", parseChoice(THREADS_POLICIES), "CPU threads of llama.cpp processes: share (default: the cores divided among the processes that may run at once, none polling when several may) or all (each every core, llama.cpp's default)"),
  flag("rpc-cache-size", "<size>", "rpcCacheBytes", parseSize, "bound on the rpc-server tensor cache in the state dir (default 32GiB)"),
  flag("kv-cache-disk", "<size>", "kvCacheBytes", parseSize, "disk in the state dir for conversations' KV caches, saved when their model unloads and restored when it loads again (default 4GiB; 0: none kept)"),
  flag("rpc-direct", "<on|off>", "rpcDirect", parseChoice(["on", "off"] as const), "RPC, model copies and KV caches between peers over direct TLS when they reach each other (default on; off: the QUIC connection only)"),
  flag("evict-mesh-models", "<on|off>", "evictMeshModels", parseChoice(["on", "off"] as const), "let loads on demand unload the model this node hosts for the mesh (default off: they are refused with 409)"),
  flag("replicas", "<on|off>", "replicas", parseChoice(["on", "off"] as const), "load a replica of a model whose servers have requests waiting for a slot, when this node has the memory (default on)"),
  flag("replica-idle", "<duration>", "replicaIdleMs", parseDuration, "unload a replica unused this long (default 5m; 0 = only when its memory is wanted)"),
  flag("affinity", "<on|off>", "affinity", parseChoice(["on", "off"] as const), "send requests that share a prompt prefix (a session, a user, a chat's opening) to the same server of their model, for its KV cache (default on; off: the least loaded)"),
  flag("fetch", "<on|off>", "fetch", parseChoice(["on", "off"] as const), "download models this node is assigned, from peers or their source (default on; off: lend compute only)"),
  flag("vram", "<size>", "vramBytes", parseSize, "memory this node offers for models, e.g. 24GB (default: detected)"),
  flag("llama-dir", "<dir>", "llamaDir", parseNonEmpty, "use the llama.cpp binaries in this directory (env MESH_LLAMA_DIR)"),
  flag("llama-release", "<tag>", "llamaRelease", parseNonEmpty, `llama.cpp release to fetch on first run (default ${LLAMA_RELEASE})`),
  flag("llama-flavor", "<flavor>", "llamaFlavor", parseChoice(FLAVORS), "llama.cpp build: cpu, vulkan, rocm, metal or cuda (default: detected)"),
  flag("llama-mirror", "<url>", "llamaMirror", parseUrl, "releases API to fetch llama.cpp from (default https://api.github.com)"),
  {
    name: "relay",
    arg: "<mode|url>",
    help: "iroh relays: default, disabled (direct addresses only), or your own relay's URL (repeatable; --transport iroh1)",
    multiple: true,
    apply: (c, t) => void (c.relay = addRelay(c.relay, t)),
  },
  flag("transport", "<line>", "transport", parseChoice(TRANSPORT_LINES), "iroh line to found the mesh on: iroh1 (default) or iroh035; a joiner follows its token, a member its state dir, and a member given the other line moves its mesh there"),
  flag("quic-bind", "<host:port>", "quicBind", parseHostPort, "address the mesh's QUIC endpoint binds (default: all interfaces, any port)"),
  { ...listFlag("api-key", "<key>", "apiKeys", "require this bearer key on /v1 and /api (repeatable)"), secret: true },
  { name: "insecure", arg: "", help: "allow --listen beyond loopback without any --api-key", multiple: false, boolean: true, apply: (c, t) => void (c.insecure = parseBoolean(t)) },
  listFlag("hosts", "<node-id|self>", "hosts", "only these nodes (64-hex ids, as mesh status --json shows them) and this one serve this node's clients and take over a model it runs; self: this node alone (repeatable; default: any member)", parseHostId),
  {
    name: "media-hosts",
    arg: "<list>",
    help: "hosts (names or IPs, comma-separated) a client's images by URL may come from even at private addresses, e.g. a NAS on the LAN (default: none; public addresses only)",
    multiple: true,
    apply: (c, t) => void c.mediaHosts.push(...parseMediaHosts(t)),
  },
  listFlag("cors-origin", "<origin>", "corsOrigins", "let web pages from this origin call the API, e.g. http://localhost:3000 (repeatable; default: none)", parseOrigin),
  flag("idle-timeout", "<duration>", "idleTimeoutS", parseIdleTimeout, "close a connection that moves no bytes this long, e.g. a stalled upload (default 30s; at most 255s)"),
  flag("max-connections", "<n>", "maxConnections", parsePositive, "requests in flight at once; more are answered 503 (default 512)"),
  flag("max-queue", "<n>", "maxQueue", parseMaxQueue, "requests that may wait for a busy model's slots; more are answered 429 with Retry-After (default 64; 0 = none wait)"),
  flag("log-format", "<format>", "logFormat", parseChoice(LOG_FORMATS), "text (default) or json, one object per line"),
  flag("scan-model-stores", "<on|off>", "scanModelStores", parseChoice(["on", "off"] as const), "serve the GGUFs Ollama, LM Studio, the Hugging Face cache and llama.cpp's cache hold, in place (default on)"),
  flag("model-stores", "<dirs>", "modelStores", parseStoreList, "more folders of GGUF models to serve in place, separated by ':' (env MESH_MODEL_STORES)"),
];

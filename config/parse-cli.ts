/**
 * argv -> what to do. Pure: no I/O, no process exit; a bad command line throws UsageError with a
 * message that names the flag and what it expects.
 */
import { parseArgs, type ParseArgsConfig } from "node:util";
import { defaultConfig, type Config } from "./config.ts";
import { NODE_FLAGS } from "./flags.ts";
import { applyLayers, envName, SettingError } from "./layers.ts";
import { parseChoice, parseLifetime } from "./values.ts";
import { GUEST_NAME } from "../mesh/roster.ts";
import { FLAVORS } from "../llama/flavor.ts";

export class UsageError extends Error {}

export type Command =
  | { kind: "help" }
  | { kind: "version" }
  | { kind: "node"; config: Config }
  | { kind: "status"; config: Config; json: boolean }
  | { kind: "token"; config: Config; guest?: { name: string | undefined; lifetimeMs: number | undefined } }
  | { kind: "roster"; config: Config; action: "init" | "join" | "rotate" | "close"; token?: string }
  | { kind: "guests"; config: Config; revoke?: string; json: boolean }
  | { kind: "open"; config: Config; print: boolean }
  | { kind: "pull"; config: Config; ref: string; name: string | undefined }
  | { kind: "models"; config: Config; json: boolean }
  | { kind: "rm"; config: Config; name: string }
  | { kind: "service"; action: "install" | "uninstall"; user: boolean; config: Config; nodeArgs: string[] }
  | { kind: "llama"; action: "show"; config: Config }
  | { kind: "llama"; action: "build"; config: Config; source: string | undefined };

export interface CommandSpec {
  name: string;
  usage: string;
  help: string;
  /** Flags of this command beyond the node flags; `value` ones take an argument. */
  flags: readonly { name: string; help: string; value?: string }[];
}

export const COMMANDS: readonly CommandSpec[] = [
  { name: "", usage: "mesh [flags]", help: "start a node: found a new mesh, or join one with --join", flags: [] },
  {
    name: "status",
    usage: "mesh status [--json]",
    help: "ask the local node (at --listen:--port) how it and its mesh are",
    flags: [{ name: "json", help: "print the node's status as JSON" }],
  },
  {
    name: "open",
    usage: "mesh open [--print]",
    help: "open the console of the local node (at --listen:--port) in a browser, or print its URL",
    flags: [{ name: "print", help: "print the URL only" }],
  },
  {
    name: "token",
    usage: "mesh token [--guest [--name NAME] [--expires DURATION]]",
    help: "print the join token of the node whose state dir this is (--state-dir), for `mesh --join`: the owner's (for your machines), or with --guest a new guest pass (for someone else's)",
    flags: [
      { name: "guest", help: "a token for a guest's machine: a new pass the roster signs, which `mesh guests revoke` can take back" },
      { name: "name", value: "<name>", help: "the guest's name, as `mesh status` and `mesh guests` show it (default: guest-XXXX)" },
      { name: "expires", value: "<duration>", help: "the pass expires after this long, e.g. 12h, 7d, 90d (default: never)" },
    ],
  },
  {
    name: "roster",
    usage: "mesh roster init|join TOKEN|rotate|close",
    help: "the key that tells your machines from guests: make one for a mesh that has none (init), take the owner's token on one of your machines (join), replace it when a machine is lost (rotate), or refuse peers without a vouch or pass (close)",
    flags: [],
  },
  {
    name: "guests",
    usage: "mesh guests [--json] | mesh guests revoke NAME",
    help: "list the guest passes of this mesh's roster and the nodes seen with each, or revoke a guest's pass (every node drops it within seconds)",
    flags: [{ name: "json", help: "print the passes as JSON" }],
  },
  {
    name: "service",
    usage: "mesh service install|uninstall [--user] [flags]",
    help: "run mesh under systemd with these flags, or remove that unit",
    flags: [{ name: "user", help: "a user unit (systemctl --user) instead of a system unit" }],
  },
  {
    name: "llama",
    usage: "mesh llama [build [--flavor F] [--source PATH|URL]]",
    help: "show which llama.cpp binaries the node would run; `build` builds them from source into the cache",
    flags: [
      { name: "flavor", value: "<flavor>", help: "build for cpu, vulkan, rocm, metal or cuda (default: detected; cuda where nvcc is)" },
      { name: "source", value: "<path|url>", help: "a llama.cpp folder, .tar.gz/.zip or git bundle (default: the release's source)" },
    ],
  },
  {
    name: "pull",
    usage: "mesh pull REF [--name NAME]",
    help: "download a model (org/repo[:QUANT], org/repo/file.gguf, hf.co/org/repo:QUANT, an https:// URL or a catalog id) into the models dir, through the local node when one answers",
    flags: [{ name: "name", value: "<name>", help: "the name the pulled model gets (default: the reference as typed)" }],
  },
  {
    name: "models",
    usage: "mesh models [--json]",
    help: "list the models on this machine: name, size, quant, store, where on disk, loaded or not",
    flags: [{ name: "json", help: "print the models as JSON" }],
  },
  {
    name: "rm",
    usage: "mesh rm NAME",
    help: "delete a model mesh downloaded itself (never a file you put there, another tool's files, or a loaded model)",
    flags: [],
  },
];

const COMMON_FLAGS = {
  help: { type: "boolean", short: "h" },
  version: { type: "boolean", short: "v" },
} as const satisfies ParseArgsConfig["options"];

/**
 * node:util parseArgs reads `--max-loaded-models -1` or `--llamacpp-args "--threads 4"` as a
 * missing value; users type them anyway, so such a value is joined to its flag with `=`.
 */
export function joinDashValues(args: readonly string[], valueFlags: ReadonlySet<string>, dashFlags: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const next = args[i + 1];
    const name = a.startsWith("--") ? a.slice(2) : "";
    if (next !== undefined && next.startsWith("-") && (dashFlags.has(name) || (valueFlags.has(name) && /^-\d/.test(next)))) {
      out.push(`${a}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}

function describeParseError(err: unknown): string {
  const e = err as { code?: string; message?: string };
  const message = String(e.message ?? err).split("\n")[0]!;
  if (e.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") return message.replace(/\. To specify a positional.*$/, "");
  return message;
}

/** Where settings other than flags come from; none by default (tests give their own). */
export interface SettingsIo {
  env: Record<string, string | undefined>;
  /** The config file in this state dir, parsed, or undefined when there is none. */
  readConfigFile: (stateDir: string) => { path: string; values: Record<string, unknown> } | undefined;
}

const NO_SETTINGS: SettingsIo = { env: {}, readConfigFile: () => undefined };

export function parseCli(argv: readonly string[], home?: string, io: SettingsIo = NO_SETTINGS): Command {
  const first = argv[0];
  const sub = COMMANDS.find((c) => c.name !== "" && c.name === first);
  if (first !== undefined && !first.startsWith("-") && !sub) {
    const known = COMMANDS.filter((c) => c.name).map((c) => c.name);
    throw new UsageError(`unknown command "${first}"; commands: ${known.join(", ")}`);
  }
  const rest = sub ? argv.slice(1) : argv;
  const options: NonNullable<ParseArgsConfig["options"]> = { ...COMMON_FLAGS };
  for (const f of NODE_FLAGS) options[f.name] = { type: f.boolean ? "boolean" : "string", multiple: f.multiple };
  for (const f of sub?.flags ?? []) options[f.name] = { type: f.value ? "string" : "boolean" };
  const args = joinDashValues(
    rest,
    new Set(NODE_FLAGS.filter((f) => !f.boolean).map((f) => f.name)),
    new Set(NODE_FLAGS.filter((f) => f.dashValue).map((f) => f.name)),
  );

  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args, options, allowPositionals: ["service", "llama", "pull", "rm", "roster", "guests"].includes(sub?.name ?? ""), strict: true });
  } catch (err) {
    throw new UsageError(describeParseError(err));
  }
  const { values, positionals } = parsed;
  if (values.help) return { kind: "help" };
  if (values.version) return { kind: "version" };

  const config = defaultConfig(home);
  const given = new Set<string>();
  for (const f of NODE_FLAGS) {
    const raw = values[f.name];
    const texts = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
    if (texts.length) given.add(f.name);
    for (const text of texts) {
      try {
        f.apply(config, String(text));
      } catch (err) {
        throw new UsageError(`--${f.name}: ${(err as Error).message}`);
      }
    }
  }
  // The config file lives in the state dir, so that one setting is found first.
  const stateDir = given.has("state-dir") ? config.stateDir : io.env[envName("state-dir")] || config.stateDir;
  try {
    applyLayers(config, NODE_FLAGS, given, { env: io.env, file: io.readConfigFile(stateDir) });
  } catch (err) {
    if (err instanceof SettingError) throw new UsageError(err.message);
    throw err;
  }

  switch (sub?.name) {
    case undefined:
      return { kind: "node", config };
    case "status":
      return { kind: "status", config, json: values.json === true };
    case "token": {
      if (!values.guest) {
        if (values.name !== undefined || values.expires !== undefined) throw new UsageError("--name and --expires go with `mesh token --guest`");
        return { kind: "token", config };
      }
      const name = values.name === undefined ? undefined : String(values.name);
      if (name !== undefined && !GUEST_NAME.test(name)) throw new UsageError(`--name: a guest's name is letters, digits, '.', '_' and '-' (at most 64, starting with a letter or digit), got "${name}"`);
      let lifetimeMs: number | undefined;
      try {
        lifetimeMs = values.expires === undefined ? undefined : parseLifetime(String(values.expires));
      } catch (err) {
        throw new UsageError(`--expires: ${(err as Error).message}`);
      }
      return { kind: "token", config, guest: { name, lifetimeMs } };
    }
    case "roster": {
      const [action, token, ...more] = positionals;
      const usage = new UsageError("usage: mesh roster init|join TOKEN|rotate|close");
      if (action === "join") {
        if (!token || more.length) throw usage;
        return { kind: "roster", config, action, token };
      }
      if ((action !== "init" && action !== "rotate" && action !== "close") || token !== undefined) throw usage;
      return { kind: "roster", config, action };
    }
    case "guests": {
      const [action, name, ...more] = positionals;
      if (action === undefined) return { kind: "guests", config, json: values.json === true };
      if (action !== "revoke" || !name || more.length) throw new UsageError("usage: mesh guests [--json] | mesh guests revoke NAME");
      return { kind: "guests", config, revoke: name, json: values.json === true };
    }
    case "open":
      return { kind: "open", config, print: values.print === true };
    case "pull": {
      const [ref, ...more] = positionals;
      if (!ref || more.length) throw new UsageError("usage: mesh pull REF [--name NAME] (one reference: org/repo[:QUANT], org/repo/file.gguf, hf.co/org/repo:QUANT, an https:// URL or a catalog id)");
      if (values.name !== undefined && String(values.name).trim() === "") throw new UsageError("--name: give the model a name, or leave --name out");
      return { kind: "pull", config, ref, name: values.name === undefined ? undefined : String(values.name) };
    }
    case "models":
      return { kind: "models", config, json: values.json === true };
    case "rm": {
      const [name, ...more] = positionals;
      if (!name || more.length) throw new UsageError("usage: mesh rm NAME (one model, as `mesh models` names it)");
      return { kind: "rm", config, name };
    }
    case "llama": {
      const action = positionals[0] ?? "show";
      if ((action !== "show" && action !== "build") || positionals.length > 1) throw new UsageError("usage: mesh llama [build [--flavor F] [--source PATH|URL]]");
      if (action === "show") {
        if (values.flavor !== undefined || values.source !== undefined) throw new UsageError("--flavor and --source go with `mesh llama build`");
        return { kind: "llama", action, config };
      }
      if (values.flavor !== undefined) {
        try {
          config.llamaFlavor = parseChoice(FLAVORS)(String(values.flavor));
        } catch (err) {
          throw new UsageError(`--flavor: ${(err as Error).message}`);
        }
      }
      return { kind: "llama", action, config, source: values.source === undefined ? undefined : String(values.source) };
    }
    case "service": {
      const action = positionals[0];
      if ((action !== "install" && action !== "uninstall") || positionals.length > 1) {
        throw new UsageError(`usage: mesh service install|uninstall [--user] [flags]`);
      }
      // The action word and --user go; a flag's value that happens to read "install" stays.
      const nodeArgs = rest.filter((a, i) => i !== rest.indexOf(action) && a !== "--user");
      return { kind: "service", action, user: values.user === true, config, nodeArgs };
    }
    default:
      throw new UsageError(`unknown command "${sub?.name}"`);
  }
}

/**
 * The systemd unit that runs mesh as a service (`mesh service install`). Pure: the caller says which
 * command runs mesh, with which flags, as a system or a user unit, and where its directories are;
 * this returns the unit's text. Words are quoted by systemd's rules, not a shell's: `%` starts a
 * specifier and `$` a variable everywhere, even inside quotes, so they are written `%%` and `$$`;
 * a word with anything else unusual is double-quoted with C-style escapes.
 *
 * The unit is readable by every user, so it holds no secret: the values of secret flags
 * (`secret` in config/flags.ts) go to the environment file it names (service/env-file.ts). A system
 * unit runs as the `mesh` user (service/system-user.ts), never as root.
 */
import { join, resolve } from "node:path";
import { NODE_FLAGS } from "../config/flags.ts";
import { envName, splitEnvList } from "../config/layers.ts";
import { envFileSetting } from "./env-file.ts";

export const UNIT_NAME = "mesh.service";

/** First line of every unit mesh writes: install replaces, and uninstall removes, only such a file. */
export const UNIT_MARKER = "# Written by `mesh service install`.";

export const isMeshUnit = (text: string) => text.startsWith(UNIT_MARKER);

export interface UnitInput {
  /** argv that runs this mesh, absolute: [binary] when compiled, [bun, main.ts] from source. */
  command: readonly string[];
  /** The node's flags as given after `install`. */
  nodeArgs: readonly string[];
  user: boolean;
  /** Where `install` ran: relative paths among the flags are resolved against it. */
  cwd: string;
  /** The config's state and models dirs (they become explicit flags and writable paths). */
  stateDir: string;
  modelsDir: string;
  /** $XDG_CACHE_HOME, else ~/.cache: mesh keeps llama.cpp in its `mesh` folder. */
  cacheHome: string;
  /** MESH_LLAMA_DIR where install ran, carried into the service's environment. */
  llamaDirEnv?: string;
  /** A URI for Documentation= (the README), when there is one. */
  docs?: string;
  /** The environment file holding the secret flags' values, when there are any (absolute). */
  envFile?: string;
  /** A system unit's account: who it runs as instead of root. */
  runAs?: { user: string; group: string; supplementaryGroups: readonly string[] };
}

/** Where the unit goes: MESH_SYSTEMD_DIR (tests, packaging), else systemd's place for admin units. */
export function unitDir(user: boolean, env: Record<string, string | undefined>, home: string): string {
  if (env.MESH_SYSTEMD_DIR) return resolve(env.MESH_SYSTEMD_DIR);
  if (!user) return "/etc/systemd/system";
  const config = env.XDG_CONFIG_HOME?.startsWith("/") ? env.XDG_CONFIG_HOME : join(home, ".config");
  return join(config, "systemd", "user");
}

const C_ESCAPES: Record<string, string> = { "\n": "\\n", "\t": "\\t", "\r": "\\r" };
const cEscape = (c: string) => C_ESCAPES[c] ?? `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`;
const PLAIN_WORD = /^[\w@%$+=:,./-]+$/;

/**
 * One word of ExecStart=, as systemd reads it back to exactly `word`. The executable's path
 * (`isPath`) goes through specifiers but not variables, so only its `%` is doubled.
 */
export function quoteExecWord(word: string, isPath = false): string {
  const escaped = word.replace(isPath ? /%/g : /[%$]/g, (c) => c + c);
  if (PLAIN_WORD.test(word)) return escaped;
  return `"${escaped.replace(/[\\"]/g, (c) => `\\${c}`).replace(/[\x00-\x1f\x7f]/g, cEscape)}"`;
}

/** A path or assignment in a directive that takes quoted words but expands no `$` (ReadWritePaths=, Environment=). */
export function quoteSetting(value: string): string {
  if (/[\x00-\x1f\x7f]/.test(value)) throw new Error(`${JSON.stringify(value)} holds a control character, which a unit file cannot carry here`);
  const escaped = value.replace(/%/g, "%%");
  return /^[\w@%+=:,./-]+$/.test(value) ? escaped : `"${escaped.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

const VALUE_FLAGS = new Set(NODE_FLAGS.filter((f) => !f.boolean).map((f) => f.name));
const SECRET_FLAGS = new Set(NODE_FLAGS.filter((f) => f.secret).map((f) => f.name));
const PATH_FLAGS = new Set(["state-dir", "models-dir", "llama-dir"]);
/** node.ts's rule: a --model value with a slash or a .gguf suffix is a file, anything else a name. */
const isModelPath = (v: string) => v.includes("/") || /\.gguf$/i.test(v);

interface FlagGroup {
  /** The flag's name, for a flag that takes a value and has one. */
  name?: string;
  value?: string;
  /** Given as `--name=value`. */
  inline?: boolean;
  words: string[];
}

/** The node's flags as given, one group per flag with its value. */
function flagGroups(args: readonly string[]): FlagGroup[] {
  const groups: FlagGroup[] = [];
  for (let i = 0; i < args.length; i++) {
    const match = /^--([^=]+)(?:=([\s\S]*))?$/.exec(args[i]!);
    const name = match?.[1];
    if (!name || !VALUE_FLAGS.has(name)) {
      groups.push({ words: [args[i]!] });
      continue;
    }
    const inline = match[2];
    const value = inline ?? args[++i];
    if (value === undefined) groups.push({ words: [args[i - 1]!] });
    else groups.push({ name, value, inline: inline !== undefined, words: inline === undefined ? [args[i - 1]!, value] : [args[i]!] });
  }
  return groups;
}

/**
 * The node's flags as the service runs them, one flag (with its value) per group: secret flags left
 * out (see serviceSecrets), paths made absolute (a service starts in /), the state and models dirs
 * always explicit (a system service's home need not be the one install saw), and
 * `--log-format json` unless a format was given, so the journal gets one JSON object per line.
 */
export function serviceArgs(input: Pick<UnitInput, "nodeArgs" | "cwd" | "stateDir" | "modelsDir">): string[][] {
  const groups: string[][] = [];
  const given = new Set<string>();
  for (const { name, value, inline, words } of flagGroups(input.nodeArgs)) {
    if (name === undefined || value === undefined) {
      groups.push(words);
      continue;
    }
    if (SECRET_FLAGS.has(name)) continue;
    given.add(name);
    const fixed = PATH_FLAGS.has(name) || (name === "model" && isModelPath(value)) ? resolve(input.cwd, value) : value;
    groups.push(inline ? [`--${name}=${fixed}`] : [`--${name}`, fixed]);
  }
  if (!given.has("state-dir")) groups.push(["--state-dir", resolve(input.cwd, input.stateDir)]);
  if (!given.has("models-dir")) groups.push(["--models-dir", resolve(input.cwd, input.modelsDir)]);
  if (!given.has("log-format")) groups.push(["--log-format", "json"]);
  return groups;
}

/**
 * The secret flags among the node's flags, as the variables the node reads them from (`--api-key`
 * is MESH_API_KEY, its values joined by commas; the last `--join` wins, as on the command line).
 * Throws for a value the node would not read back unchanged from such a list.
 */
export function serviceSecrets(nodeArgs: readonly string[]): Record<string, string> {
  const given = new Map<string, string[]>();
  for (const { name, value } of flagGroups(nodeArgs)) {
    if (name !== undefined && value !== undefined && SECRET_FLAGS.has(name)) given.set(name, [...(given.get(name) ?? []), value]);
  }
  const env: Record<string, string> = {};
  for (const f of NODE_FLAGS) {
    const values = given.get(f.name);
    if (!values) continue;
    if (!f.multiple) {
      env[envName(f.name)] = values.at(-1)!;
      continue;
    }
    // The value itself stays out of the message: it is a secret, and this line may end up in a log.
    if (values.some((v) => splitEnvList(v).length !== 1 || splitEnvList(v)[0] !== v)) {
      throw new Error(`--${f.name}: the service reads its values from ${envName(f.name)}, a comma-separated list, so a value with a comma or with spaces at its ends would change; choose one without`);
    }
    env[envName(f.name)] = values.join(",");
  }
  return env;
}

const under = (path: string, dir: string) => path === dir || path.startsWith(`${dir}/`);

/** The unit's text. Throws when the command is not absolute (systemd needs an absolute ExecStart). */
export function buildUnit(input: UnitInput): string {
  const [exe, ...exeArgs] = input.command;
  if (!exe?.startsWith("/")) throw new Error(`the command that runs mesh must be an absolute path, got ${JSON.stringify(exe)}`);
  const uninstall = `mesh service uninstall${input.user ? " --user" : ""}`;
  const lines = [
    UNIT_MARKER,
    `# \`${uninstall}\` stops and removes it; \`mesh service install${input.user ? " --user" : ""}\` with other`,
    "# flags replaces it. Edits made here are lost then.",
    "",
    "[Unit]",
    "Description=mesh, a node of a private peer-to-peer LLM mesh",
  ];
  if (input.docs) lines.push(`Documentation=${input.docs.replace(/%/g, "%%")}`);
  // A user manager has no network-online.target; ordering after it is for system units.
  if (!input.user) lines.push("After=network-online.target", "Wants=network-online.target");

  const words = [[quoteExecWord(exe, true), ...exeArgs.map((w) => quoteExecWord(w))], ...serviceArgs(input).map((g) => g.map((w) => quoteExecWord(w)))].map((g) => g.join(" "));
  const cache = resolve(input.cwd, input.cacheHome);
  const writable = [...new Set([input.stateDir, input.modelsDir, join(cache, "mesh")].map((p) => resolve(input.cwd, p)))];
  lines.push(
    "",
    "[Service]",
    "Type=simple",
    `ExecStart=${words.join(" \\\n    ")}`,
    "SyslogIdentifier=mesh",
    "# Where mesh keeps llama.cpp ($XDG_CACHE_HOME/mesh), pinned at install.",
    `Environment=${quoteSetting(`XDG_CACHE_HOME=${cache}`)}`,
  );
  if (input.llamaDirEnv) lines.push(`Environment=${quoteSetting(`MESH_LLAMA_DIR=${resolve(input.cwd, input.llamaDirEnv)}`)}`);
  if (input.envFile) {
    const secrets = [...SECRET_FLAGS].map((n) => `--${n}`).join(", ");
    lines.push(`# The values of ${secrets}: in a file only the service's user reads, since everyone reads this one.`, `EnvironmentFile=${envFileSetting(resolve(input.cwd, input.envFile))}`);
  }
  if (input.runAs) {
    lines.push(`User=${input.runAs.user}`, `Group=${input.runAs.group}`);
    if (input.runAs.supplementaryGroups.length) lines.push("# The GPUs' device nodes belong to these groups.", `SupplementaryGroups=${input.runAs.supplementaryGroups.join(" ")}`);
  }
  lines.push(
    "Restart=on-failure",
    "RestartSec=5",
    "# On SIGTERM mesh stops taking requests, lets those in flight finish, then stops its llama.cpp",
    "# children; whatever is left when it exits is killed.",
    "KillMode=mixed",
    "TimeoutStopSec=30",
    "LimitNOFILE=65536",
    "NoNewPrivileges=yes",
    "RestrictSUIDSGID=yes",
    "LockPersonality=yes",
  );
  if (input.user) {
    lines.push(
      "# ProtectSystem=, PrivateTmp= and the like are left out: a user manager can only set them up in an",
      "# unprivileged user namespace, which many systems forbid, and the unit would not start there.",
    );
  } else {
    lines.push(
      "ProtectSystem=strict",
      `ReadWritePaths=${writable.map(quoteSetting).join(" ")}`,
      "ProtectKernelTunables=yes",
      "ProtectControlGroups=yes",
    );
    // A private /tmp or a read-only /home would hide or freeze the writable paths that live there.
    if (!writable.some((p) => under(p, "/tmp") || under(p, "/var/tmp"))) lines.push("PrivateTmp=yes");
    if (!writable.some((p) => under(p, "/home"))) lines.push("ProtectHome=read-only");
    lines.push("# No PrivateDevices=: the GPUs are in /dev.");
  }
  lines.push("", "[Install]", `WantedBy=${input.user ? "default.target" : "multi-user.target"}`, "");
  return lines.join("\n");
}

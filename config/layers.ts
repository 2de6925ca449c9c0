/**
 * Where each setting comes from: a flag, else a `MESH_*` environment variable, else the config
 * file in the state dir (`config.toml`, keys named like the flags), else the default. Pure: the
 * environment and the file's parsed contents are handed in, and every bad value names its source.
 */
import type { Config, SettingSource } from "./config.ts";
import type { FlagSpec } from "./flags.ts";

export type { SettingSource } from "./config.ts";

export const CONFIG_FILE = "config.toml";

export interface SettingLayers {
  env: Record<string, string | undefined>;
  /** The config file, parsed, when there is one. */
  file: { path: string; values: Record<string, unknown> } | undefined;
}

/** `--api-key` is `MESH_API_KEY`; a repeatable flag's variable takes a comma-separated list. */
export const envName = (flag: string) => `MESH_${flag.toUpperCase().replace(/-/g, "_")}`;

/** A repeatable flag's values from its variable's text (`mesh service install` writes them so). */
export const splitEnvList = (env: string) => env.split(",").map((t) => t.trim()).filter(Boolean);

function fileTexts(value: unknown): string[] | undefined {
  if (Array.isArray(value)) {
    const texts = value.map(fileTexts);
    return texts.every((t) => t?.length === 1) ? texts.map((t) => t![0]!) : undefined;
  }
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") return [String(value)];
  return undefined;
}

export class SettingError extends Error {}

/** How a message names where setting `name` came from: the flag, its variable, or its key in the config file. */
export function settingName(config: Pick<Config, "settingSources">, name: string): string {
  const source = config.settingSources[name];
  return source === "env" ? envName(name) : source === "file" ? `${name} in ${CONFIG_FILE}` : `--${name}`;
}

/** Whether the operator set `name` (a flag, the environment or the config file), not left it to its default. */
export const given = (config: Pick<Config, "settingSources">, name: string): boolean => (config.settingSources[name] ?? "default") !== "default";

/**
 * Applies env and file values under the flags already given (`given`), recording every setting's
 * source in `config.settingSources`.
 */
export function applyLayers(config: Config, flags: readonly FlagSpec[], given: ReadonlySet<string>, layers: SettingLayers): void {
  const known = new Set(flags.map((f) => f.name));
  for (const key of Object.keys(layers.file?.values ?? {})) {
    if (!known.has(key)) throw new SettingError(`${layers.file!.path}: unknown setting "${key}" (settings are named like the flags, e.g. port, model, api-key)`);
  }
  for (const f of flags) {
    if (given.has(f.name)) {
      config.settingSources[f.name] = "flag";
      continue;
    }
    const env = layers.env[envName(f.name)];
    let texts: string[] | undefined;
    let where: string;
    if (env !== undefined && env !== "") {
      texts = f.multiple ? splitEnvList(env) : [env];
      where = envName(f.name);
      config.settingSources[f.name] = "env";
    } else if (layers.file && f.name in layers.file.values) {
      texts = fileTexts(layers.file.values[f.name]);
      where = `${f.name} in ${layers.file.path}`;
      if (!texts || (!f.multiple && texts.length !== 1)) throw new SettingError(`${where}: expected ${f.multiple ? "a value or a list of values" : "one value"}`);
      config.settingSources[f.name] = "file";
    } else {
      config.settingSources[f.name] = "default";
      continue;
    }
    for (const text of texts) {
      try {
        f.apply(config, text);
      } catch (err) {
        throw new SettingError(`${where}: ${(err as Error).message}`);
      }
    }
  }
}

/** The settings as `mesh status --json` shows them: value and source, secrets hidden. */
export function settingsReport(config: Config): { values: Record<string, unknown>; sources: Record<string, SettingSource> } {
  const { settingSources, apiKeys, join, ...rest } = config;
  return {
    values: { ...rest, apiKeys: apiKeys.map(() => "(hidden)"), join: join ? { nodeId: join.addr.nodeId } : null },
    sources: settingSources,
  };
}

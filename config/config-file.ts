/** Reads `<state dir>/config.toml` (Bun's TOML parser) for the settings layer; absent is fine, broken is an error. */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CONFIG_FILE, SettingError } from "./layers.ts";

export function readConfigFile(stateDir: string): { path: string; values: Record<string, unknown> } | undefined {
  const path = join(stateDir, CONFIG_FILE);
  if (!existsSync(path)) return undefined;
  try {
    return { path, values: Bun.TOML.parse(readFileSync(path, "utf8")) as Record<string, unknown> };
  } catch (err) {
    throw new SettingError(`${path} is not valid TOML: ${(err as Error).message}`);
  }
}

/**
 * The service's environment file, `<state-dir>/service.env`: where `mesh service install` puts the
 * values of secret flags (`--api-key`, `--join`), so that neither the unit (0644, readable by every
 * user) nor the node's argv (`ps`, /proc/PID/cmdline) holds them. The unit names the file with
 * EnvironmentFile=; systemd reads it before starting the node, and the node takes the variables
 * through its env layer (MESH_API_KEY, MESH_JOIN). Pure: text in, text out.
 *
 * Values are written by systemd's rules for that file (systemd.exec(5), "EnvironmentFile="), which
 * are not a shell's: each value goes in double quotes, where a backslash keeps any of `"`, `\`, `` ` ``
 * and `$` and nothing else is special, so `#`, `;`, `'`, spaces and newlines pass as they are.
 * systemd expands no variables in this file; escaping `$` keeps it literal even for a reader that would.
 */
export const ENV_FILE_NAME = "service.env";

/** First line of every environment file mesh writes: install replaces, and uninstall removes, only such a file. */
export const ENV_FILE_MARKER = "# Written by `mesh service install`: the secret flags of mesh.service. Keep it 0600.";

export const isMeshEnvFile = (text: string) => text.startsWith(ENV_FILE_MARKER);

/** One value as systemd reads it back to exactly `value`. NUL is the one character no variable can hold. */
export function quoteEnvValue(value: string): string {
  if (value.includes("\0")) throw new Error("a value with a NUL character cannot be an environment variable");
  return `"${value.replace(/["\\`$]/g, (c) => `\\${c}`)}"`;
}

/** The file's text: the marker, then `NAME="value"` per variable, in the order given. */
export function envFileText(vars: Readonly<Record<string, string>>): string {
  const lines = [ENV_FILE_MARKER, "# `mesh service uninstall` removes it; `mesh service install` rewrites it."];
  for (const [name, value] of Object.entries(vars)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`${JSON.stringify(name)} is not an environment variable name`);
    lines.push(`${name}=${quoteEnvValue(value)}`);
  }
  return `${lines.join("\n")}\n`;
}

/**
 * The file's path as EnvironmentFile= takes it. systemd removes no quotes there, expands `%`
 * specifiers, treats `* ? [` as a glob (where `\` escapes), and trims the line's ends, so a path
 * with a glob character, a backslash, a control character or whitespace at either end is refused
 * rather than escaped, and `%` is doubled.
 */
export function envFileSetting(path: string): string {
  if (!path.startsWith("/")) throw new Error(`the service's environment file must have an absolute path, got ${JSON.stringify(path)}`);
  if (/[\x00-\x1f\x7f*?[\\]/.test(path) || path.trim() !== path) {
    throw new Error(`the service's secrets cannot go to ${JSON.stringify(path)}: EnvironmentFile= cannot name a path with *, ?, [, \\, a control character or whitespace at its ends; choose a --state-dir without them`);
  }
  return path.replace(/%/g, "%%");
}

/** The environment file a unit of ours names, read back from its text (for uninstall and replacement). */
export function envFileOfUnit(unitText: string): string | undefined {
  const line = /^EnvironmentFile=(.*)$/m.exec(unitText)?.[1];
  return line === undefined ? undefined : line.replace(/%%/g, "%");
}

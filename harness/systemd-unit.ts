/**
 * Reading back what `mesh service install` wrote, by systemd's rules, so a test can start the node
 * the way systemd would: ExecStart= as argv, Environment= assignments, and the EnvironmentFile=
 * it names (systemd.exec(5)). The readers cover what mesh writes (service/unit.ts, service/env-file.ts);
 * tests/unit/service-systemd.test.ts checks them against systemd's own tools.
 */

const C_ESCAPES: Record<string, string> = { n: "\n", t: "\t", r: "\r" };

/** One value of a directive, its `"..."` words unquoted (C escapes) and its specifiers (`%%`) undone. */
function words(text: string): string[] {
  return [...text.matchAll(/"((?:[^"\\]|\\.)*)"|(\S+)/g)].map((m) =>
    m[1] !== undefined ? m[1].replace(/\\(x[0-9a-fA-F]{2}|.)/g, (_, e: string) => (e.length === 3 ? String.fromCharCode(parseInt(e.slice(1), 16)) : (C_ESCAPES[e] ?? e))) : m[2]!,
  );
}

/** The [Service] directive's values, continuation lines joined as systemd joins them. */
export function directives(unit: string, key: string): string[] {
  return unit
    .replace(/\\\n\s*/g, " ")
    .split("\n")
    .filter((l) => l.startsWith(`${key}=`))
    .map((l) => l.slice(key.length + 1));
}

/** ExecStart= as the argv systemd starts: `%%` is `%` and `$$` is `$` (mesh writes no variables). */
export function execStartArgv(unit: string): string[] {
  const [line] = directives(unit, "ExecStart");
  if (line === undefined) throw new Error("the unit has no ExecStart=");
  return words(line).map((w) => w.replace(/%%/g, "%").replace(/\$\$/g, "$"));
}

/** The Environment= assignments, in order. */
export function unitEnvironment(unit: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of directives(unit, "Environment")) {
    for (const w of words(line)) {
      const eq = w.indexOf("=");
      env[w.slice(0, eq)] = w.slice(eq + 1).replace(/%%/g, "%");
    }
  }
  return env;
}

/**
 * An environment file as systemd reads it (src/basic/env-file.c): `#`/`;` comment lines (a
 * trailing backslash continues them), KEY=VALUE with the value unquoted (backslash keeps the next
 * character, ends trimmed), in '...' (verbatim) or in "..." (backslash keeps any of "\`$, joins
 * lines before a newline, and is kept before anything else); quoted parts may follow each other.
 */
export function parseEnvFile(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  type State = "pre-key" | "key" | "pre-value" | "value" | "value-escape" | "single" | "double" | "double-escape" | "comment" | "comment-escape";
  let state: State = "pre-key";
  let key = "";
  let value = "";
  /** Length of `value` up to its last non-whitespace character, for trimming an unquoted value. */
  let kept = 0;
  const push = () => {
    if (key.trim()) env[key.trim()] = value.slice(0, kept);
    key = value = "";
    kept = 0;
  };
  const add = (s: string, counts = true) => {
    value += s;
    if (counts) kept = value.length;
  };
  for (const c of text) {
    const nl = c === "\n";
    const ws = c === " " || c === "\t" || c === "\r";
    switch (state) {
      case "pre-key":
        if (c === "#" || c === ";") state = "comment";
        else if (!ws && !nl) {
          key = c;
          state = "key";
        }
        break;
      case "key":
        if (nl) {
          key = "";
          state = "pre-key";
        } else if (c === "=") state = "pre-value";
        else key += c;
        break;
      case "pre-value":
        if (nl) {
          push();
          state = "pre-key";
        } else if (c === "'") state = "single";
        else if (c === '"') state = "double";
        else if (c === "\\") state = "value-escape";
        else if (!ws) {
          add(c);
          state = "value";
        }
        break;
      case "value":
        if (nl) {
          push();
          state = "pre-key";
        } else if (c === "\\") state = "value-escape";
        else add(c, !ws);
        break;
      case "value-escape":
        state = "value";
        if (!nl) add(c);
        break;
      case "single":
        if (c === "'") state = "pre-value";
        else add(c);
        break;
      case "double":
        if (c === '"') state = "pre-value";
        else if (c === "\\") state = "double-escape";
        else add(c);
        break;
      case "double-escape":
        state = "double";
        if ('"\\`$'.includes(c)) add(c);
        else if (!nl) add(`\\${c}`);
        break;
      case "comment":
        if (c === "\\") state = "comment-escape";
        else if (nl) state = "pre-key";
        break;
      case "comment-escape":
        state = "comment";
        break;
    }
  }
  if (state !== "pre-key" && state !== "key" && state !== "comment" && state !== "comment-escape") push();
  return env;
}

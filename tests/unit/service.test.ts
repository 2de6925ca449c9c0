/**
 * The systemd unit `mesh service install` writes: quoting, flags, system vs user, and secrets kept out
 * of it (in the environment file, by systemd's rules). systemd's own reading of it is in
 * service-systemd.test.ts.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildUnit, isMeshUnit, quoteExecWord, quoteSetting, serviceArgs, serviceSecrets, UNIT_MARKER, unitDir, type UnitInput } from "../../service/unit.ts";
import { ENV_FILE_MARKER, envFileOfUnit, envFileSetting, envFileText, isMeshEnvFile, quoteEnvValue } from "../../service/env-file.ts";
import { execStartArgv, parseEnvFile, unitEnvironment } from "../../harness/systemd-unit.ts";
import { AS_MESH, base, readableTempDirs } from "../../harness/unit-inputs.ts";

const temps = readableTempDirs();
afterAll(temps.remove);
const tempDir = temps.fresh;

const unit = (over: Partial<UnitInput>) => buildUnit({ ...base, ...over });
const directive = (text: string, key: string) => text.split("\n").filter((l) => l.startsWith(`${key}=`)).map((l) => l.slice(key.length + 1));
/** ExecStart= as one line, its continuations joined as systemd joins them. */
const execStart = (text: string) => /^ExecStart=((?:.*\\\n)*.*)$/m.exec(text)![1]!.replace(/ \\\n\s+/g, " ");

describe("quoteExecWord: one ExecStart word, by systemd's rules", () => {
  const cases: [word: string, quoted: string][] = [
    ["--port", "--port"],
    ["/opt/mesh/bin/mesh", "/opt/mesh/bin/mesh"],
    ["--max-loaded-models=-1", "--max-loaded-models=-1"],
    ["my model.gguf", '"my model.gguf"'],
    ["100%", "100%%"],
    ["%h", "%%h"],
    ["$HOME", "$$HOME"],
    ["${HOME}", '"$${HOME}"'],
    ["a b$c%d", '"a b$$c%%d"'],
    ['say "hi"', '"say \\"hi\\""'],
    ["it's", '"it\'s"'],
    ["C:\\models", '"C:\\\\models"'],
    ["", '""'],
    [";", '";"'],
    ["\\;", '"\\\\;"'],
    ["line\nnext\ttab\x01", '"line\\nnext\\ttab\\x01"'],
    ["ünïcode", '"ünïcode"'],
  ];
  test.each(cases)("%p -> %p", (word, quoted) => expect(quoteExecWord(word)).toBe(quoted));

  test("the executable's path doubles % but not $ (systemd expands no variables there)", () => {
    expect(quoteExecWord("/opt/a$b/100%/mesh", true)).toBe("/opt/a$b/100%%/mesh");
    expect(quoteExecWord("/home/John Doe/mesh", true)).toBe('"/home/John Doe/mesh"');
  });
});

describe("quoteSetting: paths and assignments (no variables, but specifiers)", () => {
  const cases: [value: string, quoted: string][] = [
    ["/var/lib/mesh", "/var/lib/mesh"],
    ["/srv/my models", '"/srv/my models"'],
    ["/srv/100%", "/srv/100%%"],
    ["/srv/$x", '"/srv/$x"'],
    ['/srv/a"b\\c', '"/srv/a\\"b\\\\c"'],
    ["XDG_CACHE_HOME=/home/u/my cache", '"XDG_CACHE_HOME=/home/u/my cache"'],
  ];
  test.each(cases)("%p -> %p", (value, quoted) => expect(quoteSetting(value)).toBe(quoted));
  test("a control character is refused", () => expect(() => quoteSetting("/srv/a\nb")).toThrow("control character"));
});

describe("serviceArgs: the node's flags as the service runs them", () => {
  const dirs = ["--state-dir", "/var/lib/mesh/state", "--models-dir", "/var/lib/mesh/models"];
  const cases: [name: string, nodeArgs: string[], expected: string[]][] = [
    ["no flags: dirs explicit, JSON logs", [], [...dirs, "--log-format", "json"]],
    ["--log-format text is kept", ["--log-format", "text"], ["--log-format", "text", ...dirs]],
    ["--log-format=json is kept, not doubled", ["--log-format=json"], ["--log-format=json", ...dirs]],
    ["a value that looks like --log-format is a value", ["--llamacpp-args", "--log-format x"], ["--llamacpp-args", "--log-format x", ...dirs, "--log-format", "json"]],
    ["relative dirs become absolute, in place", ["--state-dir", "st", "--models-dir=../m"], ["--state-dir", "/srv/work/st", "--models-dir=/srv/m", "--log-format", "json"]],
    ["a model file becomes absolute, a model name does not", ["--model", "my model.gguf", "--model", "tiny", "--model", "/m/a.gguf"], ["--model", "/srv/work/my model.gguf", "--model", "tiny", "--model", "/m/a.gguf", ...dirs, "--log-format", "json"]],
    ["--llama-dir becomes absolute", ["--llama-dir", "llama/bin"], ["--llama-dir", "/srv/work/llama/bin", ...dirs, "--log-format", "json"]],
    ["dash values and booleans pass", ["--max-loaded-models", "-1", "--insecure", "--port", "9999"], ["--max-loaded-models", "-1", "--insecure", "--port", "9999", ...dirs, "--log-format", "json"]],
    ["secret flags are left out, in both forms", ["--api-key", "k1", "--port", "1", "--api-key=k2", "--join", "mesh1x", "--join=mesh1y"], ["--port", "1", ...dirs, "--log-format", "json"]],
    ["a value that reads like a secret flag is a value", ["--llamacpp-args", "--api-key", "--model", "--join"], ["--llamacpp-args", "--api-key", "--model", "--join", ...dirs, "--log-format", "json"]],
  ];
  test.each(cases)("%s", (_name, nodeArgs, expected) => {
    expect(serviceArgs({ ...base, nodeArgs }).flat()).toEqual(expected);
  });

  test("a flag and its value stay together, one group per line of ExecStart", () => {
    expect(serviceArgs({ ...base, nodeArgs: ["--insecure", "--port", "1"] })).toEqual([["--insecure"], ["--port", "1"], ["--state-dir", base.stateDir], ["--models-dir", base.modelsDir], ["--log-format", "json"]]);
  });
});

describe("buildUnit", () => {
  test("a system unit: ordered after the network, hardened, wanted by multi-user.target", () => {
    const text = unit({ nodeArgs: ["--port", "9999"], docs: "file:///opt/mesh/README.md" });
    expect(text.startsWith(`${UNIT_MARKER}\n# \`mesh service uninstall\` stops and removes it`)).toBe(true);
    expect(isMeshUnit(text)).toBe(true);
    expect(execStart(text)).toBe("/usr/local/bin/mesh --port 9999 --state-dir /var/lib/mesh/state --models-dir /var/lib/mesh/models --log-format json");
    const expected: [string, string[]][] = [
      ["Documentation", ["file:///opt/mesh/README.md"]],
      ["After", ["network-online.target"]],
      ["Wants", ["network-online.target"]],
      ["Type", ["simple"]],
      ["Restart", ["on-failure"]],
      ["RestartSec", ["5"]],
      ["TimeoutStopSec", ["30"]],
      ["KillMode", ["mixed"]],
      ["LimitNOFILE", ["65536"]],
      ["Environment", ["XDG_CACHE_HOME=/root/.cache"]],
      ["NoNewPrivileges", ["yes"]],
      ["PrivateTmp", ["yes"]],
      ["ProtectSystem", ["strict"]],
      ["ReadWritePaths", ["/var/lib/mesh/state /var/lib/mesh/models /root/.cache/mesh"]],
      ["ProtectHome", ["read-only"]],
      ["ProtectKernelTunables", ["yes"]],
      ["ProtectControlGroups", ["yes"]],
      ["RestrictSUIDSGID", ["yes"]],
      ["LockPersonality", ["yes"]],
      ["PrivateDevices", []],
      ["WantedBy", ["multi-user.target"]],
    ];
    for (const [key, values] of expected) expect([key, directive(text, key)]).toEqual([key, values]);
  });

  test("a user unit: default.target, no network-online.target, no namespace sandboxing", () => {
    const text = unit({ user: true, stateDir: "/home/u/.mesh", modelsDir: "/home/u/.models", cacheHome: "/home/u/.cache" });
    expect(text).toContain("# `mesh service uninstall --user` stops and removes it; `mesh service install --user` with other");
    expect(directive(text, "WantedBy")).toEqual(["default.target"]);
    for (const key of ["After", "Wants", "ProtectSystem", "ReadWritePaths", "PrivateTmp", "ProtectHome", "ProtectKernelTunables", "ProtectControlGroups", "PrivateDevices"]) {
      expect([key, directive(text, key)]).toEqual([key, []]);
    }
    for (const key of ["NoNewPrivileges", "RestrictSUIDSGID", "LockPersonality"]) expect([key, directive(text, key)]).toEqual([key, ["yes"]]);
  });

  const writable: [name: string, over: Partial<UnitInput>, paths: string, protectHome: boolean, privateTmp: boolean][] = [
    ["under /root: ProtectHome=read-only, the paths writable", { stateDir: "/root/.mesh", modelsDir: "/root/.models" }, "/root/.mesh /root/.models /root/.cache/mesh", true, true],
    ["under /home: no ProtectHome", { stateDir: "/home/u/.mesh", modelsDir: "/home/u/.models", cacheHome: "/home/u/.cache" }, "/home/u/.mesh /home/u/.models /home/u/.cache/mesh", false, true],
    ["one of them under /home is enough", { modelsDir: "/home/u/models" }, "/var/lib/mesh/state /home/u/models /root/.cache/mesh", false, true],
    ["/homework is not /home", { modelsDir: "/homework/m" }, "/var/lib/mesh/state /homework/m /root/.cache/mesh", true, true],
    ["under /tmp: no PrivateTmp", { stateDir: "/tmp/mesh" }, "/tmp/mesh /var/lib/mesh/models /root/.cache/mesh", true, false],
    ["relative dirs resolved against cwd, duplicates once", { stateDir: "s", modelsDir: "/srv/work/s", cacheHome: "c" }, "/srv/work/s /srv/work/c/mesh", true, true],
    ["spaces and % quoted", { stateDir: "/srv/my state", modelsDir: "/srv/100%" }, '"/srv/my state" /srv/100%% /root/.cache/mesh', true, true],
  ];
  test.each(writable)("ReadWritePaths %s", (_name, over, paths, protectHome, privateTmp) => {
    const text = unit(over);
    expect(directive(text, "ReadWritePaths")).toEqual([paths]);
    expect(directive(text, "ProtectHome")).toEqual(protectHome ? ["read-only"] : []);
    expect(directive(text, "PrivateTmp")).toEqual(privateTmp ? ["yes"] : []);
  });

  test("tricky flags are quoted on their own continued lines", () => {
    const text = unit({ command: ["/opt/bun", "/opt/my mesh/main.ts"], nodeArgs: ["--model", "my model.gguf", "--model", `a$b%c"d\\e'f`, "--llamacpp-args", "--threads 4"] });
    expect(text).toContain(
      [
        'ExecStart=/opt/bun "/opt/my mesh/main.ts" \\',
        '    --model "/srv/work/my model.gguf" \\',
        `    --model "a$$b%%c\\"d\\\\e'f" \\`,
        '    --llamacpp-args "--threads 4" \\',
        "    --state-dir /var/lib/mesh/state \\",
        "    --models-dir /var/lib/mesh/models \\",
        "    --log-format json\n",
      ].join("\n"),
    );
  });

  test("MESH_LLAMA_DIR is carried, Documentation's % doubled, Documentation left out without a README", () => {
    const text = unit({ llamaDirEnv: "llama", docs: "file:///opt/my%20mesh/README.md" });
    expect(directive(text, "Environment")).toEqual(["XDG_CACHE_HOME=/root/.cache", "MESH_LLAMA_DIR=/srv/work/llama"]);
    expect(directive(text, "Documentation")).toEqual(["file:///opt/my%%20mesh/README.md"]);
    expect(directive(unit({}), "Documentation")).toEqual([]);
  });

  test("the command must be absolute", () => {
    expect(() => unit({ command: ["mesh"] })).toThrow("must be an absolute path");
  });

  test("isMeshUnit knows only our header", () => {
    expect(isMeshUnit(unit({}))).toBe(true);
    expect(isMeshUnit("[Unit]\nDescription=mesh\n")).toBe(false);
    expect(isMeshUnit(`\n${UNIT_MARKER}`)).toBe(false);
  });
});

describe("unitDir", () => {
  const cases: [name: string, user: boolean, env: Record<string, string>, dir: string][] = [
    ["system", false, {}, "/etc/systemd/system"],
    ["system ignores XDG_CONFIG_HOME", false, { XDG_CONFIG_HOME: "/x" }, "/etc/systemd/system"],
    ["user", true, {}, "/home/u/.config/systemd/user"],
    ["user under XDG_CONFIG_HOME", true, { XDG_CONFIG_HOME: "/cfg" }, "/cfg/systemd/user"],
    ["a relative XDG_CONFIG_HOME is ignored", true, { XDG_CONFIG_HOME: "cfg" }, "/home/u/.config/systemd/user"],
    ["MESH_SYSTEMD_DIR wins for both", true, { MESH_SYSTEMD_DIR: "/pkg/lib/systemd/user" }, "/pkg/lib/systemd/user"],
  ];
  test.each(cases)("%s", (_name, user, env, dir) => expect(unitDir(user, env, "/home/u")).toBe(dir));
});

describe("serviceSecrets: the secret flags as the variables the node reads", () => {
  const cases: [name: string, nodeArgs: string[], env: Record<string, string>][] = [
    ["none", ["--port", "1", "--model", "m"], {}],
    ["keys joined by commas, in order, both forms", ["--api-key", "sk-1", "--port", "1", "--api-key=sk-2"], { MESH_API_KEY: "sk-1,sk-2" }],
    ["keys with quotes, $, %, #, ; and inner spaces pass as they are", ["--api-key", `a"b$c%d#e;f g'h\\i`], { MESH_API_KEY: `a"b$c%d#e;f g'h\\i` }],
    ["the join token", ["--join", "mesh1abc"], { MESH_JOIN: "mesh1abc" }],
    ["the last --join wins, as on the command line", ["--join=mesh1a", "--join", "mesh1b"], { MESH_JOIN: "mesh1b" }],
    ["both", ["--join", "mesh1t", "--api-key", "k"], { MESH_JOIN: "mesh1t", MESH_API_KEY: "k" }],
    ["a value that reads like --api-key is not one", ["--llamacpp-args", "--api-key"], {}],
  ];
  test.each(cases)("%s", (_name, nodeArgs, env) => expect(serviceSecrets(nodeArgs)).toEqual(env));

  const refused: [name: string, key: string][] = [
    ["a comma", "sk-9f3a,b"],
    ["a leading space", " sk-9f3a"],
    ["a trailing tab", "sk-9f3a\t"],
  ];
  test.each(refused)("a key with %s is refused, without echoing it", (_name, key) => {
    const err = (() => {
      try {
        serviceSecrets(["--api-key", "fine", "--api-key", key]);
      } catch (e) {
        return e as Error;
      }
    })();
    expect(err?.message).toContain("--api-key: the service reads its values from MESH_API_KEY, a comma-separated list");
    expect(err?.message).not.toContain("sk-9f3a");
  });
});

describe("the environment file, by systemd's rules for EnvironmentFile=", () => {
  /** Values and how they are written; each must read back as itself. */
  const cases: [value: string, written: string][] = [
    ["sk-secret-123", '"sk-secret-123"'],
    ["", '""'],
    ['a"b', '"a\\"b"'],
    ["a\\b", '"a\\\\b"'],
    ["a`b", '"a\\`b"'],
    ["$HOME ${HOME} $", '"\\$HOME \\${HOME} \\$"'],
    ["it's", `"it's"`],
    ["#not a comment", '"#not a comment"'],
    [";nor this", '";nor this"'],
    ["  spaces kept  ", '"  spaces kept  "'],
    ["%h %% (no specifiers here)", '"%h %% (no specifiers here)"'],
    ["a,b", '"a,b"'],
    ["two\nlines", '"two\nlines"'],
    ["ends in a backslash\\", '"ends in a backslash\\\\"'],
    ["backslash then newline\\\n", '"backslash then newline\\\\\n"'],
    ["\\n is not a newline", '"\\\\n is not a newline"'],
    ["tab\there", '"tab\there"'],
    ["ünïcode ✓", '"ünïcode ✓"'],
  ];
  test.each(cases)("%p is written %p and read back as itself", (value, written) => {
    expect(quoteEnvValue(value)).toBe(written);
    expect(parseEnvFile(envFileText({ MESH_API_KEY: value }))).toEqual({ MESH_API_KEY: value });
  });

  // systemd's environment.d generator reads such files with the same parser as EnvironmentFile=,
  // then expands $VARIABLES (which EnvironmentFile= does not) and drops empty ones: values without
  // either are checked against it too.
  const GENERATOR = "/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator";
  /** The variables systemd's parser reads from `text` (named MESH_* or single letters). */
  function systemdReads(text: string): Record<string, string> {
    const dir = tempDir();
    mkdirSync(join(dir, "environment.d"));
    writeFileSync(join(dir, "environment.d", "50-mesh.conf"), text);
    const r = Bun.spawnSync([GENERATOR], { env: { XDG_CONFIG_HOME: dir, HOME: dir }, stdout: "pipe", stderr: "pipe" });
    expect(r.exitCode).toBe(0);
    // It prints KEY=VALUE, the value double-quoted with C escapes where it needs quoting.
    const read: Record<string, string> = {};
    for (const line of r.stdout.toString().split("\n")) {
      const m = /^(MESH_\w+|[A-Z])=(.*)$/.exec(line);
      if (!m) continue;
      const q = /^"(.*)"$/.exec(m[2]!);
      read[m[1]!] = q ? q[1]!.replace(/\\(.)/g, (_, c: string) => ({ n: "\n", t: "\t", r: "\r" })[c] ?? c) : m[2]!;
    }
    return read;
  }

  test("the test reader follows systemd's rules for what mesh does not write too", () => {
    const text = ["# c \\", "X=continued comment", "  A = plain  value  ", "B='single ''joined'", 'C="x\\qy"', "D=un\\ quoted\\", "E", "; c"].join("\n");
    const expected = { A: "plain  value", B: "single joined", C: "x\\qy", D: "un quotedE" };
    expect(parseEnvFile(text)).toEqual(expected);
    if (existsSync(GENERATOR)) expect(systemdReads(text)).toEqual(expected);
  });

  test("the file: marker first, one line per variable; NUL and bad names refused", () => {
    const text = envFileText({ MESH_JOIN: "mesh1t", MESH_API_KEY: "k1,k2" });
    expect(text).toBe(`${ENV_FILE_MARKER}\n# \`mesh service uninstall\` removes it; \`mesh service install\` rewrites it.\nMESH_JOIN="mesh1t"\nMESH_API_KEY="k1,k2"\n`);
    expect(isMeshEnvFile(text)).toBe(true);
    expect(isMeshEnvFile("MESH_API_KEY=x\n")).toBe(false);
    expect(() => quoteEnvValue("a\0b")).toThrow("NUL");
    expect(() => envFileText({ "BAD NAME": "x" })).toThrow("not an environment variable name");
  });

  const paths: [path: string, setting: string | undefined][] = [
    ["/var/lib/mesh/service.env", "/var/lib/mesh/service.env"],
    ["/srv/my state/service.env", "/srv/my state/service.env"],
    ["/srv/100%/service.env", "/srv/100%%/service.env"],
    ['/srv/a"b/service.env', '/srv/a"b/service.env'],
    ["/srv/a*b/service.env", undefined],
    ["/srv/a?b/service.env", undefined],
    ["/srv/a[b/service.env", undefined],
    ["/srv/a\\b/service.env", undefined],
    ["/srv/a\nb/service.env", undefined],
    ["/srv/trailing /service.env ", undefined],
    ["relative/service.env", undefined],
  ];
  test.each(paths)("EnvironmentFile=%p -> %p", (path, setting) => {
    if (setting === undefined) expect(() => envFileSetting(path)).toThrow();
    else {
      expect(envFileSetting(path)).toBe(setting);
      expect(envFileOfUnit(`[Service]\nEnvironmentFile=${setting}\n`)).toBe(path);
    }
  });

  test.skipIf(!existsSync(GENERATOR))("systemd's own parser reads every value back as itself", () => {
    const vars = Object.fromEntries(cases.map(([v]) => v).filter((v) => v && !v.includes("$")).map((v, i) => [`MESH_T${i}`, v]));
    expect(systemdReads(envFileText(vars))).toEqual(vars);
  });
});

describe("buildUnit: secrets and the account", () => {
  test("a system unit as mesh: no secret in it, EnvironmentFile=, User=, Group=, SupplementaryGroups=", () => {
    const text = unit({ ...AS_MESH, nodeArgs: ["--api-key", "sk-secret-123", "--join", "mesh1token", "--port", "1"] });
    expect(text).not.toContain("sk-secret-123");
    expect(text).not.toContain("mesh1token");
    expect(execStartArgv(text)).toEqual(["/usr/local/bin/mesh", "--port", "1", "--state-dir", base.stateDir, "--models-dir", base.modelsDir, "--log-format", "json"]);
    const expected: [string, string[]][] = [
      ["EnvironmentFile", ["/var/lib/mesh/state/service.env"]],
      ["User", ["mesh"]],
      ["Group", ["mesh"]],
      ["SupplementaryGroups", ["video render"]],
    ];
    for (const [key, values] of expected) expect([key, directive(text, key)]).toEqual([key, values]);
  });

  test("no GPU group here: no SupplementaryGroups=; no secrets: no EnvironmentFile=; a user unit: no User=", () => {
    expect(directive(unit({ runAs: { user: "mesh", group: "mesh", supplementaryGroups: [] } }), "SupplementaryGroups")).toEqual([]);
    expect(directive(unit({}), "EnvironmentFile")).toEqual([]);
    const user = unit({ user: true, envFile: "/home/u/.mesh/service.env" });
    expect(directive(user, "EnvironmentFile")).toEqual(["/home/u/.mesh/service.env"]);
    for (const key of ["User", "Group", "SupplementaryGroups"]) expect([key, directive(user, key)]).toEqual([key, []]);
  });

  test("the environment file's path: % doubled, a glob character refused", () => {
    expect(directive(unit({ envFile: "/srv/100%/service.env" }), "EnvironmentFile")).toEqual(["/srv/100%%/service.env"]);
    expect(() => unit({ envFile: "/srv/[x]/service.env" })).toThrow("EnvironmentFile= cannot name");
  });

  test("the test reader gets ExecStart and Environment back as mesh meant them", () => {
    const text = unit({ nodeArgs: ["--model", `a$b%c"d\\e'f`], llamaDirEnv: "/opt/100% llama" });
    expect(execStartArgv(text).slice(1, 3)).toEqual(["--model", `a$b%c"d\\e'f`]);
    expect(unitEnvironment(text)).toEqual({ XDG_CACHE_HOME: "/root/.cache", MESH_LLAMA_DIR: "/opt/100% llama" });
  });
});

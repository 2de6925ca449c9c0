/**
 * Settings under fuzzing: `config.toml` as arbitrary text, as generated files with known and
 * unknown keys, wrong types, huge values and deep tables, and as valid files with bytes mutated;
 * `MESH_*` variables with arbitrary values. Each time the command line parser gives a config whose
 * numbers the node can use (finite, whole, timers it can set), or a UsageError naming where the
 * bad value came from (`config.toml`, or the variable), never another exception.
 */
import { afterAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readConfigFile } from "../../config/config-file.ts";
import type { Config } from "../../config/config.ts";
import { NODE_FLAGS } from "../../config/flags.ts";
import { envName } from "../../config/layers.ts";
import { parseCli, UsageError, type Command } from "../../config/parse-cli.ts";
import { mutateText, mutation } from "./arbitraries.ts";
import { holds } from "./settings.ts";

const RUNS = 200;
/** The longest a timer can wait: setTimeout fires at once beyond it. */
const MAX_TIMER_MS = 2 ** 31 - 1;

const root = mkdtempSync(join(tmpdir(), "mesh-fuzz-config-"));
const home = join(root, "home");
const stateDir = join(root, "state");
mkdirSync(stateDir);
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** The numbers the node hands to timers, children and the network: whole, finite, in range. */
function expectUsable(config: Config): void {
  const whole = ["port", "maxLoadedModels", "idleUnloadMs", "loadTimeoutMs", "ctxSize", "maxBodyBytes", "rpcThreads", "rpcCacheBytes"] as const;
  for (const key of whole) expect({ key, ok: Number.isSafeInteger(config[key]) }).toEqual({ key, ok: true });
  if (config.vramBytes !== undefined) expect(Number.isSafeInteger(config.vramBytes)).toBe(true);
  expect(config.port).toBeLessThanOrEqual(65535);
  expect(config.idleUnloadMs).toBeLessThanOrEqual(MAX_TIMER_MS);
  expect(config.loadTimeoutMs).toBeLessThanOrEqual(MAX_TIMER_MS);
}

/** Parses with the given file text (none: no file) and environment; checks what comes out. */
function parseWith(fileText: string | undefined, env: Record<string, string>): { command?: Command; error?: string } {
  if (fileText === undefined) rmSync(join(stateDir, "config.toml"), { force: true });
  else writeFileSync(join(stateDir, "config.toml"), fileText);
  let command: Command;
  try {
    command = parseCli(["--state-dir", stateDir], home, { env, readConfigFile });
  } catch (err) {
    if (!(err instanceof UsageError)) throw new Error(`parseCli threw ${(err as Error)?.constructor?.name}, not a UsageError: ${(err as Error)?.message}`);
    expect(err.message).toMatch(/\S/);
    return { error: err.message };
  }
  if (command.kind === "node") expectUsable(command.config);
  return { command };
}

const KEYS = NODE_FLAGS.map((f) => f.name).filter((k) => k !== "state-dir");

/** Number-like text at every scale, bare or with a unit: 30d, 1e20, 400 nines, 0.5s. */
const numberText = fc
  .tuple(
    fc.oneof(
      fc.nat().map(String),
      fc.tuple(fc.integer({ min: 1, max: 400 }), fc.integer({ min: 1, max: 9 })).map(([len, d]) => String(d).repeat(len)),
      fc.double({ min: 0, noNaN: true }).map(String),
      fc.constantFrom("-1", "0", "-0", "1e20", "2147483648", "9007199254740993", "Infinity", "NaN"),
    ),
    fc.constantFrom("", "", "ms", "s", "m", "h", "d", "k", "KB", "MiB", "GB", "GiB", "T", "TiB"),
  )
  .map(([n, unit]) => n + unit);

/** A TOML value, written out: right and wrong types, huge numbers and strings, deep nesting. */
const tomlValue: fc.Arbitrary<string> = fc.letrec<{ value: string }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.string({ unit: "binary", maxLength: 40 }).map((s) => JSON.stringify(s)),
    fc.constantFrom("9337", "0", "-1", "1", "4096", "30m", "1h30m", "0.5s", "64MiB", "24GB", "on", "off", "json", "127.0.0.1:0", "https://x.example", "http://localhost:3000").map((s) => JSON.stringify(s)),
    numberText.map((s) => JSON.stringify(s)),
    fc.integer().map(String),
    fc.double().map((d) => (Number.isNaN(d) ? "nan" : d === Infinity ? "inf" : d === -Infinity ? "-inf" : Number.isInteger(d) && Math.abs(d) < 2 ** 53 ? `${d}.0` : String(d))),
    fc.constantFrom("true", "false", "1979-05-27T07:32:00Z", "07:32:00", "inf", "nan", "1e400", "0x7fffffff", "9007199254740991", "9223372036854775807", "'''multi\nline'''"),
    fc.array(tie("value"), { maxLength: 4 }).map((vs) => `[${vs.join(", ")}]`),
    fc.dictionary(fc.stringMatching(/^[a-z][a-z-]{0,8}$/), tie("value"), { maxKeys: 3 }).map((d) => `{ ${Object.entries(d).map(([k, v]) => `${k} = ${v}`).join(", ")} }`),
  ),
})).value;

const key = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...KEYS) }, { weight: 1, arbitrary: fc.stringMatching(/^[a-z_][a-z0-9_-]{0,12}$/) }, { weight: 1, arbitrary: fc.constantFrom("__proto__", "constructor", "toString", '"quoted key"') });

const tomlFile = fc
  .tuple(
    fc.uniqueArray(fc.tuple(key, tomlValue), { maxLength: 6, selector: ([k]) => k }),
    fc.option(fc.tuple(fc.array(fc.stringMatching(/^[a-z]{1,6}$/), { minLength: 1, maxLength: 40 }), fc.uniqueArray(fc.tuple(key, tomlValue), { maxLength: 3, selector: ([k]) => k }))),
    fc.nat({ max: 3000 }),
  )
  .map(([pairs, table, deep]) => {
    const lines = pairs.map(([k, v]) => `${k} = ${v}`);
    if (table) lines.push(`[${table[0].join(".")}]`, ...table[1].map(([k, v]) => `${k} = ${v}`));
    if (deep % 7 === 0) lines.push(`deep = ${"[".repeat(deep)}${"]".repeat(deep)}`);
    return `${lines.join("\n")}\n`;
  });

const VALID_FILE = `port = 9337
model = ["qwen2.5-7b-instruct-q4_k_m", "nomic-embed"]
api-key = ["sk-local-1"]
idle-unload = "30m"
load-timeout = "2m"
max-loaded-models = -1
max-body-size = "64MiB"
ctx-size = 4096
vram = "24GB"
rpc-direct = "on"
log-format = "json"
`;

describe("config.toml, fuzzed", () => {
  const namesTheFile = (r: { error?: string }) => {
    if (r.error !== undefined) expect(r.error).toContain("config.toml");
  };

  test("arbitrary text: a usable config or an error naming config.toml", () => {
    holds(fc.property(fc.string({ unit: "binary", maxLength: 400 }), (text) => namesTheFile(parseWith(text, {}))), { runs: RUNS });
  });

  test("generated files (known and unknown keys, wrong types, huge values, deep tables): the same", () => {
    holds(fc.property(tomlFile, (text) => namesTheFile(parseWith(text, {}))), { runs: RUNS });
  });

  test("every setting given numbers at every scale, quoted or bare: the same", () => {
    const bare = (t: string) => (/^\d+(\.\d+)?(e[+-]?\d+)?$/.test(t) && t.length < 300 ? t : JSON.stringify(t));
    holds(fc.property(fc.constantFrom(...KEYS), numberText, fc.boolean(), (k, t, quoted) => namesTheFile(parseWith(`${k} = ${quoted ? JSON.stringify(t) : bare(t)}\n`, {}))), { runs: RUNS });
  });

  test("a file nested 100,000 arrays deep: an error naming config.toml, not a crash", () => {
    const r = parseWith(`port = ${"[".repeat(100_000)}${"]".repeat(100_000)}\n`, {});
    expect(r.error).toContain("config.toml");
  });

  test("a valid file with bytes mutated: the same", () => {
    expect(parseWith(VALID_FILE, {}).command?.kind).toBe("node");
    holds(fc.property(fc.array(mutation, { minLength: 1, maxLength: 5 }), (ms) => namesTheFile(parseWith(mutateText(VALID_FILE, ms), {}))), { runs: RUNS });
  });
});

describe("MESH_* variables, fuzzed", () => {
  const envValue = fc.oneof(
    fc.string({ unit: "binary", maxLength: 60 }).map((s) => s.replace(/\0/g, "")),
    numberText,
    fc.constantFrom("0", "-1", "65536", "1e9", "Infinity", "NaN", "30d", "25d", "24d", "9007199254740993", "on", "true", "mesh1", ",,,"),
  );
  const env = fc.dictionary(fc.constantFrom(...KEYS.map(envName)), envValue, { maxKeys: 4 });

  test("arbitrary values: a usable config or an error naming the variable", () => {
    holds(
      fc.property(env, (vars) => {
        const r = parseWith(undefined, vars);
        if (r.error === undefined) return;
        const named = /MESH_[A-Z_]+/.exec(r.error)?.[0];
        expect(named !== undefined && named in vars).toBe(true);
      }),
      { runs: RUNS },
    );
  });

  test("every variable given numbers at every scale: the same", () => {
    holds(
      fc.property(fc.constantFrom(...KEYS), numberText, (k, t) => {
        const r = parseWith(undefined, { [envName(k)]: t });
        if (r.error !== undefined) expect(r.error).toContain(envName(k));
      }),
      { runs: RUNS },
    );
  });
});

describe("settings regressions found by fuzzing", () => {
  test.each([
    ["idle-unload", '"30d"', "at most"],
    ["load-timeout", "2592000", "at most"],
    ["ctx-size", "1e20", "too large"],
    ["max-body-size", `"${"9".repeat(400)}"`, "expected a size"],
    ["vram", '"100000000000000000000"', "expected a size"],
    ["rpc-threads", `"${"9".repeat(30)}"`, "too large"],
    ["rpc-cache-size", '"8888TiB"', "expected a size up to"],
  ])("a huge %s is refused, not taken as a number no timer or child can use", (name, value, message) => {
    const r = parseWith(`${name} = ${value}\n`, {});
    expect(r.error).toContain("config.toml");
    expect(r.error).toContain(message);
  });

  test.each(["30d", "2222222"])("MESH_LOAD_TIMEOUT=%s is refused (a timer set so far fires at once)", (value) => {
    expect(parseWith(undefined, { MESH_LOAD_TIMEOUT: value }).error).toStartWith("MESH_LOAD_TIMEOUT: expected a duration of at most 24d");
  });
});

/** `mesh --help`, generated from the command and flag tables so it never drifts from the parser. */
import { COMMANDS } from "./parse-cli.ts";
import { NODE_FLAGS } from "./flags.ts";

export function helpText(): string {
  const rows = (pairs: [string, string][]) => {
    const width = Math.max(...pairs.map(([a]) => a.length)) + 2;
    return pairs.map(([a, b]) => `  ${a.padEnd(width)}${b}`).join("\n");
  };
  const commands = rows(COMMANDS.map((c) => [c.usage, c.help]));
  const flags = rows([
    ...NODE_FLAGS.map((f): [string, string] => [`--${f.name}${f.arg ? ` ${f.arg}` : ""}`, f.help]),
    ...COMMANDS.flatMap((c) => c.flags.map((f): [string, string] => [`--${f.name}${f.value ? ` ${f.value}` : ""}`, `(${c.name}) ${f.help}`])),
    ["-h, --help", "show this help"],
    ["-v, --version", "print the mesh version and the llama.cpp build it expects"],
  ]);
  return `mesh: a private peer-to-peer LLM mesh with one OpenAI-compatible API on every node

Commands:
${commands}

Flags:
${flags}

Every flag can also be set with a MESH_* environment variable (--api-key: MESH_API_KEY, lists
comma-separated) or in <state-dir>/config.toml (api-key = ["k1", "k2"]); flags win over the
environment, which wins over the file. \`mesh status --json\` shows each setting's source.

Get a model with \`mesh pull org/repo:Q4_K_M\` (or hf.co/org/repo:QUANT, org/repo/file.gguf, an
https:// URL, a catalog id such as qwen2.5-7b-instruct); \`mesh models\` lists what is on disk.
Start a mesh with \`mesh --model <file.gguf>\`; \`mesh token\` prints its join token (kept in the
state dir, never logged or served). On other machines run \`mesh --join <token>\`. Every node answers
http://127.0.0.1:9337/v1 (OpenAI-compatible); web pages only from --cors-origin origins.
`;
}

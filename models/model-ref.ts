/**
 * What a user may name a model to pull by (pure): `org/repo[:QUANT]` (llama.cpp's `-hf` syntax),
 * `org/repo/path/file.gguf`, either with `hf.co/` or `huggingface.co/` in front (Ollama's
 * syntax), a Hugging Face page or `resolve` URL (a Hub reference, so its files' SHA-256 come from
 * the Hub), any other http(s) URL of a `.gguf` file, and the id of a well-known model
 * (known-models.json). Anything else without a slash is a plain local model name.
 */
import { basename } from "node:path";
import { isSafeModelName } from "./model-transfer.ts";
import { findKnownModel } from "./known-models.ts";
import { isGgufPath, quantNames } from "./hf-files.ts";
import { PullError } from "./pull-error.ts";

export type ModelRef =
  | { kind: "hf"; repo: string; revision: string; quant: string | undefined; file: string | undefined }
  | { kind: "url"; url: string };

const DEFAULT_REVISION = "main";
/** A repository id as the Hub allows it: one owner, one name, no separators or dots in front. */
const REPO_ID = /^[\w-][\w.-]{0,95}\/[\w-][\w.-]{0,95}$/;
const QUANT = /^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/;
const REVISION = /^[\w-][\w.-]{0,127}$/;
const HUB_HOSTS = new Set(["huggingface.co", "www.huggingface.co", "hf.co"]);
const HUB_PREFIX = /^(?:huggingface\.co|hf\.co)\//i;
/** `scheme://` in front: a URL, never a name or a Hub path. */
const URL_PREFIX = /^[a-z][a-z0-9+.-]*:\/\//i;
const MAX_REF_LENGTH = 2048;
/** The forms a reference takes, for the error that says a text is none. */
const REF_FORMS = "org/repo[:QUANT], org/repo/path/file.gguf, hf.co/org/repo[:QUANT], an https:// URL of a .gguf file, or a catalog id";

const bad = (text: string, why: string) => new PullError("bad_reference", `"${text}" is not a model reference: ${why}`);

/** undefined: not a reference (a plain local model name). Throws PullError("bad_reference") for a malformed one. */
export function parseModelRef(text: string): ModelRef | undefined {
  const t = text.trim();
  if (t === "") throw bad(text, "it is empty");
  if (t.length > MAX_REF_LENGTH) throw bad(t.slice(0, 64), `it is longer than ${MAX_REF_LENGTH} characters`);
  if (/[\x00-\x20\x7f]/.test(t)) throw bad(t, "it holds spaces or control characters");
  if (URL_PREFIX.test(t)) return parseUrl(t);
  if (HUB_PREFIX.test(t)) return parseHubPath(t, t.replace(HUB_PREFIX, ""));
  if (!t.includes("/")) {
    const known = findKnownModel(t);
    return known && { kind: "hf", repo: known.repo, revision: DEFAULT_REVISION, quant: known.quant, file: undefined };
  }
  // `dir/name` may as well be a local model in a subfolder: only a clear reference is one.
  const segments = t.split("/");
  if (t.includes(":") || (segments.length > 2 && /\.gguf$/i.test(t))) return parseHubPath(t, t);
  if (segments.length === 2 && REPO_ID.test(t)) return { kind: "hf", repo: t, revision: DEFAULT_REVISION, quant: undefined, file: undefined };
  return undefined;
}

/** What must be pulled: `parseModelRef`, with a plain local name refused too (PullError "bad_reference"). */
export function pullableRef(text: string): ModelRef {
  const ref = parseModelRef(text);
  if (!ref) throw bad(text.trim().slice(0, 200), `use ${REF_FORMS}`);
  return ref;
}

/** `parseModelRef` for text from elsewhere (a peer, models.json): a malformed reference is none, not a throw. */
export function modelRefOf(text: string): ModelRef | undefined {
  try {
    return parseModelRef(text);
  } catch {
    return undefined;
  }
}

/** `org/repo[:QUANT]` or `org/repo/path/file.gguf`, as typed after any `hf.co/`. */
function parseHubPath(text: string, path: string): ModelRef {
  const segments = path.split("/");
  if (segments.length < 2) throw bad(text, "a Hugging Face reference is org/repo[:QUANT] or org/repo/path/file.gguf");
  if (segments.length === 2) {
    const [repoPart, quant, ...more] = path.split(":");
    if (more.length > 0) throw bad(text, "it has more than one ':'");
    if (!REPO_ID.test(repoPart!)) throw bad(text, `"${repoPart}" is not a repository id (org/name: letters, digits, '-', '_', '.')`);
    if (quant === undefined || quant.toLowerCase() === "latest") return { kind: "hf", repo: repoPart!, revision: DEFAULT_REVISION, quant: undefined, file: undefined };
    if (!QUANT.test(quant)) throw bad(text, `"${quant}" is not a quant (such as Q4_K_M)`);
    return { kind: "hf", repo: repoPart!, revision: DEFAULT_REVISION, quant, file: undefined };
  }
  const repo = segments.slice(0, 2).join("/");
  const file = segments.slice(2).join("/");
  if (!REPO_ID.test(repo)) throw bad(text, `"${repo}" is not a repository id (org/name: letters, digits, '-', '_', '.')`);
  if (!isGgufPath(file)) throw bad(text, `"${file}" is not a safe path to a .gguf file in the repository`);
  return { kind: "hf", repo, revision: DEFAULT_REVISION, quant: undefined, file };
}

function parseUrl(text: string): ModelRef {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw bad(text, "it is not a valid URL");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw bad(text, "only http and https URLs can be pulled");
  if (HUB_HOSTS.has(url.hostname.toLowerCase())) return parseHubUrl(text, url);
  if (!/\.gguf$/i.test(url.pathname)) throw bad(text, "a URL must name a .gguf file");
  const name = fileNameOf(url);
  if (name === undefined) throw bad(text, "its file name cannot be used as one here");
  return { kind: "url", url: url.href };
}

/** A Hub page or file URL: `/org/repo`, `/org/repo/resolve/REV/path` (or `blob`, the file's page). */
function parseHubUrl(text: string, url: URL): ModelRef {
  let parts: string[];
  try {
    parts = url.pathname.split("/").filter((p) => p !== "").map(decodeURIComponent);
  } catch {
    throw bad(text, "its path is not valid percent-encoding");
  }
  const repo = parts.slice(0, 2).join("/");
  if (parts.length < 2 || !REPO_ID.test(repo)) throw bad(text, "a Hugging Face URL names org/repo");
  if (parts.length === 2) return { kind: "hf", repo, revision: DEFAULT_REVISION, quant: undefined, file: undefined };
  const [, , how, revision, ...rest] = parts;
  if ((how !== "resolve" && how !== "blob") || revision === undefined || rest.length === 0) {
    throw bad(text, "a Hugging Face file URL reads https://huggingface.co/org/repo/resolve/REVISION/path/file.gguf");
  }
  if (!REVISION.test(revision)) throw bad(text, `"${revision}" is not a revision (a branch, tag or commit)`);
  const file = rest.join("/");
  if (!isGgufPath(file)) throw bad(text, `"${file}" is not a safe path to a .gguf file in the repository`);
  return { kind: "hf", repo, revision, quant: undefined, file };
}

/** The file name a URL's last segment gives, if it can be one (and ends in `.gguf`). */
export function fileNameOf(url: URL): string | undefined {
  let name: string;
  try {
    name = decodeURIComponent(url.pathname.split("/").pop() ?? "");
  } catch {
    return undefined;
  }
  return isGgufPath(name) && !name.includes("/") ? name : undefined;
}

/** A file name without `.gguf` and without a shard suffix: what the models-dir scan would call it. */
const stemOf = (file: string) => basename(file).replace(/\.gguf$/i, "").replace(/-\d{5}-of-\d{5}$/i, "");

/**
 * The name a pulled model gets when none is given: the reference as typed (trimmed) for Hub
 * references and catalog ids, so that the name a client pulled is the name it then asks for; a
 * URL's file stem. A typed reference too deep to be a name keeps its repository and file stem.
 */
export function defaultModelName(text: string): string {
  const t = text.trim();
  const ref = parseModelRef(t);
  if (URL_PREFIX.test(t)) {
    const file = ref?.kind === "hf" ? ref.file : ref?.kind === "url" ? fileNameOf(new URL(ref.url)) : undefined;
    const name = file === undefined ? ref?.kind === "hf" ? ref.repo : undefined : stemOf(file);
    if (name !== undefined && isSafeModelName(name)) return name;
    throw bad(t, "no model name can be made from it; give one");
  }
  if (isSafeModelName(t)) return t;
  if (ref?.kind === "hf") {
    const name = ref.file === undefined ? ref.repo : `${ref.repo}/${stemOf(ref.file)}`;
    if (isSafeModelName(name)) return name;
  }
  throw bad(t, "no model name can be made from it; give one");
}

/**
 * The reference written into models.json and announced: exact, so that any node pulling it gets
 * the same files: `org/repo/path/first-shard.gguf` (a Hub URL for another revision than main), or the URL.
 */
export function exactRef(ref: ModelRef, firstFile?: string): string {
  if (ref.kind === "url") return ref.url;
  const file = firstFile ?? ref.file;
  if (file === undefined) return ref.quant === undefined ? ref.repo : `${ref.repo}:${ref.quant}`;
  // A path with a space would not read back as a reference; the URL form percent-encodes it.
  if (ref.revision === DEFAULT_REVISION && !/[\x00-\x20\x7f]/.test(file)) return `${ref.repo}/${file}`;
  return `https://huggingface.co/${ref.repo}/resolve/${encodeURIComponent(ref.revision)}/${file.split("/").map(encodeURIComponent).join("/")}`;
}

/**
 * Whether a model pulled by the exact reference `pulled` (as models.json records it) is what
 * `wanted` asks for: the same file, or a file of the same repository that the quant names (any,
 * when none is named), so that pulling `org/repo` again finds what the first pull chose.
 */
export function refSatisfies(pulled: string, wanted: ModelRef): boolean {
  const have = modelRefOf(pulled);
  if (!have) return false;
  if (wanted.kind === "url" || have.kind === "url") return have.kind === wanted.kind && exactRef(have) === exactRef(wanted);
  if (have.repo !== wanted.repo || have.revision !== wanted.revision || have.file === undefined) return false;
  if (wanted.file !== undefined) return have.file === wanted.file || sameSplit(have.file, wanted.file);
  return wanted.quant === undefined || quantNames(wanted.quant, have.file);
}

/** Two shards of one split model. */
function sameSplit(a: string, b: string): boolean {
  const strip = (f: string) => /-\d{5}-of-\d{5}\.gguf$/i.test(f) && f.replace(/-\d{5}(-of-\d{5}\.gguf)$/i, "$1");
  const [sa, sb] = [strip(a), strip(b)];
  return sa !== false && sa === sb;
}

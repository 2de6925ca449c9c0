/**
 * Other tools' model stores, laid out as those tools lay them out, for tests: an Ollama manifest and
 * its blobs, a Hugging Face cache snapshot whose files link into `blobs/`, plain folders (LM Studio,
 * llama.cpp's cache). And a snapshot of every file under a folder (bytes, mtime, link target) to
 * show that mesh never changed one.
 */
import { createHash } from "node:crypto";
import { copyFileSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";

const sha256 = (bytes: Uint8Array | string) => createHash("sha256").update(bytes).digest("hex");

function put(path: string, bytes: Uint8Array | string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, bytes);
}

/** Writes `bytes` as an Ollama blob; returns its digest (`sha256:<hex>`). */
export function ollamaBlob(root: string, bytes: Uint8Array | string): string {
  const hex = sha256(bytes);
  put(join(root, "blobs", `sha256-${hex}`), bytes);
  return `sha256:${hex}`;
}

export interface OllamaFixtureModel {
  host?: string;
  namespace?: string;
  model: string;
  tag?: string;
  /** A GGUF file copied in as the model blob. */
  gguf: string;
  projector?: string;
}

/** An Ollama model as `ollama pull` leaves it: config, template and model layers, a projector if given. */
export function ollamaModel(root: string, m: OllamaFixtureModel): { manifest: string; blob: string } {
  const model = ollamaBlob(root, readFileSync(m.gguf));
  const config = ollamaBlob(root, JSON.stringify({ model_format: "gguf", model_family: "llama" }));
  const template = ollamaBlob(root, "{{ .Prompt }}");
  const layers = [
    { mediaType: "application/vnd.ollama.image.model", digest: model, size: 1 },
    { mediaType: "application/vnd.ollama.image.template", digest: template, size: 1 },
  ];
  if (m.projector) layers.push({ mediaType: "application/vnd.ollama.image.projector", digest: ollamaBlob(root, readFileSync(m.projector)), size: 1 });
  const manifest = join(root, "manifests", m.host ?? "registry.ollama.ai", m.namespace ?? "library", m.model, m.tag ?? "latest");
  put(manifest, JSON.stringify({ schemaVersion: 2, mediaType: "application/vnd.docker.distribution.manifest.v2+json", config: { mediaType: "application/vnd.docker.container.image.v1+json", digest: config, size: 1 }, layers }));
  return { manifest, blob: join(root, "blobs", `sha256-${model.slice("sha256:".length)}`) };
}

/**
 * A repo in a Hugging Face hub cache at one revision, as huggingface_hub writes it: each file's
 * bytes in `blobs/<sha256>`, a relative link to it at `snapshots/<revision>/<path>`, and
 * `refs/main` naming the revision when `main` is set. Returns the links.
 */
export function hfCacheRepo(hub: string, repo: string, revision: string, files: Record<string, string>, main = true): string[] {
  const repoDir = join(hub, `models--${repo.replace("/", "--")}`);
  const links: string[] = [];
  for (const [path, source] of Object.entries(files)) {
    const bytes = readFileSync(source);
    const blob = join(repoDir, "blobs", sha256(bytes));
    put(blob, bytes);
    const link = join(repoDir, "snapshots", revision, path);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(relative(dirname(link), blob), link);
    links.push(link);
  }
  if (main) put(join(repoDir, "refs", "main"), revision);
  return links;
}

/** Copies a file into place, making its folders. */
export function placeFile(source: string, dest: string): string {
  mkdirSync(dirname(dest), { recursive: true });
  copyFileSync(source, dest);
  return dest;
}

/** Every entry under `root`: a file's size, mtime and SHA-256, a link's target, a folder's mtime. */
export function treeSnapshot(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      const st = lstatSync(path);
      const rel = relative(root, path);
      if (st.isSymbolicLink()) out[rel] = `link ${readlinkSync(path)} ${st.mtimeMs}`;
      else if (st.isDirectory()) {
        out[rel] = `dir ${st.mtimeMs}`;
        walk(path);
      } else out[rel] = `file ${st.size} ${st.mtimeMs} ${sha256(readFileSync(path))}`;
    }
  };
  walk(root);
  return out;
}

/**
 * A Hugging Face Hub for tests, on loopback, speaking the real protocol: the tree API
 * (`/api/models/{repo}/tree/{revision}?recursive=true`, paged with `Link: <…>; rel="next"`,
 * LFS entries with their SHA-256 and size), `resolve` answering 302 to a CDN on another origin
 * with `x-linked-etag` and `x-linked-size` as the Hub does, errors with the Hub's `X-Error-Code`,
 * gated repos (401 without `Authorization: Bearer <token>`, 403 with a wrong one) and private ones
 * (401 RepoNotFound, as the Hub hides them). The CDN honours Range; a test can make it cut a file's
 * next transfer after N bytes (the connection closes, or stays open and silent until released),
 * serve a file's bytes wrong, and count each file's complete downloads. Its CDN can be held to a
 * rate (a hub slower than the link a test compares it with).
 */
export type FakeFile = Uint8Array | { fromFile: string; claimSize?: number } | { bytes: Uint8Array; claimSize?: number };

export interface FakeRepo {
  repo: string;
  files: Record<string, FakeFile>;
  /** Files listed, downloads need the token (401 without, 403 with a wrong one). */
  gated?: boolean;
  /** Nothing without the token: 401 RepoNotFound, as the Hub answers for a repo it will not show. */
  private?: boolean;
}

export interface FakeRequest {
  server: "hub" | "cdn";
  method: string;
  /** Path and query. */
  path: string;
  range: string | null;
  authorization: string | null;
  status: number;
}

export interface FakeHubOptions {
  repos: FakeRepo[];
  /** The token gated and private repos want. */
  token?: string;
  /** Tree entries per page (the Hub pages at 1000). */
  pageSize?: number;
  /** Where both servers listen (127.0.0.1): a lab's bridge address, for nodes in their own namespaces. */
  hostname?: string;
  /** The CDN sends each transfer at this many bytes per second at most (unthrottled when absent). */
  cdnBytesPerSecond?: number;
}

export interface FakeHub {
  /** What HF_ENDPOINT is set to. */
  endpoint: string;
  cdnOrigin: string;
  token: string;
  requests: FakeRequest[];
  sha256(repo: string, path: string): string;
  /** The CDN's requests for a file, in order. */
  cdnRequests(repo: string, path: string): FakeRequest[];
  /** Complete transfers of a file by the CDN (a cut one resumed to its end counts once). */
  downloads(repo: string, path: string): number;
  /** The file's next CDN transfer stops after `afterBytes`: the connection closes, or with `hold` hangs until `release()`. */
  cutNext(repo: string, path: string, afterBytes: number, opts?: { hold?: boolean }): void;
  /** Serve the file's bytes with one changed (its SHA-256 no longer matches), or right again. */
  corrupt(repo: string, path: string, on?: boolean): void;
  /** Ends every held transfer (its connection closes). */
  release(): void;
  addRepo(repo: FakeRepo): Promise<void>;
  stop(): Promise<void>;
}

interface Stored {
  id: number;
  repo: string;
  path: string;
  bytes: Uint8Array;
  size: number;
  sha256: string;
  gitOid: string;
  lfs: boolean;
  downloads: number;
  cut: { afterBytes: number; hold: boolean } | undefined;
  corrupt: boolean;
}

const sha = (algo: "sha256" | "sha1", ...parts: (string | Uint8Array)[]) => {
  const h = new Bun.CryptoHasher(algo);
  for (const p of parts) h.update(p);
  return h.digest("hex");
};

const CHUNK = 256 * 1024;

export async function startFakeHub(opts: FakeHubOptions): Promise<FakeHub> {
  const token = opts.token ?? "hf_fake_token_for_tests";
  const pageSize = opts.pageSize ?? 1000;
  const repos = new Map<string, { def: FakeRepo; files: Stored[] }>();
  const byId: Stored[] = [];
  const requests: FakeRequest[] = [];
  const held = new Set<() => void>();

  const addRepo = async (def: FakeRepo) => {
    const files: Stored[] = [];
    for (const [path, f] of Object.entries(def.files)) {
      const bytes = f instanceof Uint8Array ? f : "bytes" in f ? f.bytes : await Bun.file(f.fromFile).bytes();
      const claim = f instanceof Uint8Array ? undefined : f.claimSize;
      const stored: Stored = {
        id: byId.length,
        repo: def.repo,
        path,
        bytes,
        size: claim ?? bytes.length,
        sha256: sha("sha256", bytes),
        gitOid: sha("sha1", `blob ${bytes.length}\0`, bytes),
        lfs: path.endsWith(".gguf"),
        downloads: 0,
        cut: undefined,
        corrupt: false,
      };
      byId.push(stored);
      files.push(stored);
    }
    repos.set(def.repo, { def, files: files.sort((a, b) => a.path.localeCompare(b.path)) });
  };
  for (const r of opts.repos) await addRepo(r);

  const find = (repo: string, path: string) => {
    const f = repos.get(repo)?.files.find((x) => x.path === path);
    if (!f) throw new Error(`fake hub: no ${repo}/${path}`);
    return f;
  };

  const hubError = (status: number, code: string, message: string) =>
    Response.json({ error: message }, { status, headers: { "x-error-code": code, "x-error-message": message } });

  /** The Hub's access rules: undefined when the request may go on. */
  const refused = (req: Request, repo: { def: FakeRepo } | undefined, download: boolean): Response | undefined => {
    const auth = req.headers.get("authorization");
    const authed = auth === `Bearer ${token}`;
    if (!repo || (repo.def.private && !authed)) {
      return auth ? hubError(404, "RepoNotFound", "Repository not found") : hubError(401, "RepoNotFound", "Repository not found");
    }
    if (download && repo.def.gated && !authed) {
      const message = "Access to this model is restricted. You must have access to it and be authenticated to access it.";
      return auth ? hubError(403, "GatedRepo", message) : hubError(401, "GatedRepo", message);
    }
    return undefined;
  };

  const cdnUrl = (f: Stored) => `${cdn.url.origin}/repos/${f.id}/${f.sha256}?X-Amz-Signature=${sha("sha256", String(f.id)).slice(0, 16)}`;

  /** A server on loopback whose every answer is written down in `requests`. */
  const serve = (server: FakeRequest["server"], answer: (req: Request, url: URL) => Response) =>
    Bun.serve({
      hostname: opts.hostname ?? "127.0.0.1",
      port: 0,
      fetch(req) {
        const url = new URL(req.url);
        const res = answer(req, url);
        requests.push({ server, method: req.method, path: url.pathname + url.search, range: req.headers.get("range"), authorization: req.headers.get("authorization"), status: res.status });
        return res;
      },
    });

  const hub = serve("hub", hubAnswer);

  function hubAnswer(req: Request, url: URL): Response {
    const parts = url.pathname.split("/").slice(1).map(decodeURIComponent);
    // /api/models/{org}/{name}/tree/{revision}
    if (parts[0] === "api" && parts[1] === "models" && parts[4] === "tree" && req.method === "GET") {
      const repo = repos.get(`${parts[2]}/${parts[3]}`);
      const no = refused(req, repo, false);
      if (no) return no;
      if (parts[5] !== "main" || parts.length > 6) return hubError(404, "RevisionNotFound", `Invalid rev id: ${parts[5]}`);
      const entries = treeEntries(repo!.files, url.searchParams.get("recursive") === "true");
      const cursor = Number(url.searchParams.get("cursor") ?? 0);
      const page = entries.slice(cursor, cursor + pageSize);
      const headers: Record<string, string> = {};
      if (cursor + pageSize < entries.length) {
        const next = new URL(url);
        next.searchParams.set("cursor", String(cursor + pageSize));
        headers.link = `<${next.href}>; rel="next"`;
      }
      return Response.json(page, { headers });
    }
    // /{org}/{name}/resolve/{revision}/{path...}
    if (parts[2] === "resolve" && (req.method === "GET" || req.method === "HEAD")) {
      const repo = repos.get(`${parts[0]}/${parts[1]}`);
      const no = refused(req, repo, true);
      if (no) return no;
      if (parts[3] !== "main") return hubError(404, "RevisionNotFound", `Invalid rev id: ${parts[3]}`);
      const f = repo!.files.find((x) => x.path === parts.slice(4).join("/"));
      if (!f) return hubError(404, "EntryNotFound", "Entry not found");
      const common = { "x-repo-commit": "0".repeat(40), "accept-ranges": "bytes" };
      if (!f.lfs) return new Response(req.method === "HEAD" ? null : f.bytes, { headers: { ...common, etag: `"${f.gitOid}"`, "content-length": String(f.size) } });
      return new Response(null, {
        status: 302,
        headers: { ...common, location: cdnUrl(f), etag: `"${f.sha256}"`, "x-linked-etag": `"${f.sha256}"`, "x-linked-size": String(f.size) },
      });
    }
    return hubError(404, "EntryNotFound", "Not found");
  }

  function treeEntries(files: Stored[], recursive: boolean) {
    const dirs = new Set<string>();
    for (const f of files) {
      const segs = f.path.split("/");
      for (let i = 1; i < segs.length; i++) dirs.add(segs.slice(0, i).join("/"));
    }
    const entries = [
      ...[...dirs].map((path) => ({ type: "directory", oid: sha("sha1", path), size: 0, path })),
      ...files.map((f) => ({
        type: "file",
        oid: f.gitOid,
        size: f.size,
        path: f.path,
        ...(f.lfs ? { lfs: { oid: f.sha256, size: f.size, pointerSize: 134 } } : {}),
      })),
    ].sort((a, b) => a.path.localeCompare(b.path));
    return recursive ? entries : entries.filter((e) => !e.path.includes("/"));
  }

  const cdn = serve("cdn", cdnAnswer);

  function cdnAnswer(req: Request, url: URL): Response {
    const m = /^\/repos\/(\d+)\/([0-9a-f]{64})$/.exec(url.pathname);
    const f = m ? byId[Number(m[1])] : undefined;
    if (!f || f.sha256 !== m![2]) return new Response("<Error><Code>NoSuchKey</Code></Error>", { status: 404 });
    const headers: Record<string, string> = { etag: `"${f.sha256}"`, "accept-ranges": "bytes", "content-type": "binary/octet-stream" };
    let start = 0;
    let status = 200;
    const range = /^bytes=(\d+)-$/.exec(req.headers.get("range") ?? "");
    if (range) {
      start = Number(range[1]);
      if (start >= f.size) return new Response(null, { status: 416, headers: { ...headers, "content-range": `bytes */${f.size}` } });
      status = 206;
      headers["content-range"] = `bytes ${start}-${f.size - 1}/${f.size}`;
    }
    headers["content-length"] = String(f.size - start);
    if (req.method === "HEAD") return new Response(null, { status, headers });
    let body = f.bytes;
    if (f.corrupt) {
      body = new Uint8Array(f.bytes);
      // After the GGUF magic, so the file is refused for its hash, not its first bytes.
      const at = Math.min(body.length - 1, 64);
      body[at] = body[at]! ^ 0xff;
    }
    const cut = f.cut;
    f.cut = undefined;
    let offset = start;
    const end = cut ? Math.min(body.length, start + cut.afterBytes) : body.length;
    const rate = opts.cdnBytesPerSecond;
    const began = performance.now();
    return new Response(
      new ReadableStream({
        type: "bytes",
        async pull(controller) {
          if (offset < end) {
            // Held to the rate: each chunk leaves no sooner than the bytes before it allow.
            if (rate !== undefined) await Bun.sleep(Math.max(0, began + ((offset - start) * 1000) / rate - performance.now()));
            const next = Math.min(end, offset + (rate === undefined ? CHUNK : Math.min(CHUNK, Math.ceil(rate / 10))));
            controller.enqueue(body.slice(offset, next));
            offset = next;
            return;
          }
          if (!cut) {
            f.downloads++;
            return controller.close();
          }
          if (cut.hold) await new Promise<void>((resolve) => held.add(resolve));
          else await Bun.sleep(20); // the client takes the bytes sent before the connection drops
          // An error with no reason drops the connection and keeps the log quiet.
          controller.error();
        },
      }),
      { status, headers },
    );
  }

  return {
    endpoint: hub.url.origin,
    cdnOrigin: cdn.url.origin,
    token,
    requests,
    sha256: (repo, path) => find(repo, path).sha256,
    downloads: (repo, path) => find(repo, path).downloads,
    cdnRequests: (repo, path) => {
      const prefix = `/repos/${find(repo, path).id}/`;
      return requests.filter((r) => r.server === "cdn" && r.path.startsWith(prefix));
    },
    cutNext: (repo, path, afterBytes, o) => {
      find(repo, path).cut = { afterBytes, hold: o?.hold === true };
    },
    corrupt: (repo, path, on = true) => {
      find(repo, path).corrupt = on;
    },
    release: () => {
      for (const r of held) r();
      held.clear();
    },
    addRepo,
    stop: async () => {
      for (const r of held) r();
      held.clear();
      await Promise.all([hub.stop(true), cdn.stop(true)]);
    },
  };
}

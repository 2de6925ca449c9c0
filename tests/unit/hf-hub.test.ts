import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hubConfigFromEnv, nextPage, resolveUrl, treeUrl, type HubConfig } from "../../models/hf-hub.ts";

const home = mkdtempSync(join(tmpdir(), "mesh-hf-home-"));
afterAll(() => rmSync(home, { recursive: true, force: true }));
const put = (rel: string, text: string) => {
  const path = join(home, rel);
  mkdirSync(join(path, ".."), { recursive: true });
  writeFileSync(path, text);
  return path;
};
put(".cache/huggingface/token", "hf_login\n");
put("custom-hf/token", "hf_from_hf_home");
put("xdg/huggingface/token", "hf_from_xdg");
const tokenPath = put("elsewhere/tok", "  hf_from_path  \n");
const badToken = put("bad/token", "two words");

describe("hubConfigFromEnv", () => {
  const cases: [string, Record<string, string | undefined>, HubConfig | string][] = [
    ["defaults: huggingface.co and the login file", {}, { endpoint: "https://huggingface.co", token: "hf_login" }],
    ["HF_TOKEN first", { HF_TOKEN: "hf_env", HF_TOKEN_PATH: tokenPath }, { endpoint: "https://huggingface.co", token: "hf_env" }],
    ["the older HUGGING_FACE_HUB_TOKEN", { HUGGING_FACE_HUB_TOKEN: "hf_old" }, { endpoint: "https://huggingface.co", token: "hf_old" }],
    ["an empty HF_TOKEN is none", { HF_TOKEN: "  ", HF_TOKEN_PATH: tokenPath }, { endpoint: "https://huggingface.co", token: "hf_from_path" }],
    ["HF_TOKEN_PATH, trimmed", { HF_TOKEN_PATH: tokenPath, HF_HOME: join(home, "custom-hf") }, { endpoint: "https://huggingface.co", token: "hf_from_path" }],
    ["$HF_HOME/token", { HF_HOME: join(home, "custom-hf") }, { endpoint: "https://huggingface.co", token: "hf_from_hf_home" }],
    ["$XDG_CACHE_HOME/huggingface/token", { XDG_CACHE_HOME: join(home, "xdg") }, { endpoint: "https://huggingface.co", token: "hf_from_xdg" }],
    ["a token file that is not there", { HF_TOKEN_PATH: join(home, "nope") }, { endpoint: "https://huggingface.co", token: undefined }],
    ["a token that could not be one header value", { HF_TOKEN_PATH: badToken }, { endpoint: "https://huggingface.co", token: undefined }],
    ["HF_TOKEN with a line break", { HF_TOKEN: "a\r\nx-evil: 1", HF_HOME: join(home, "none") }, { endpoint: "https://huggingface.co", token: undefined }],
    ["HF_ENDPOINT, trailing slash dropped", { HF_ENDPOINT: "https://hf-mirror.example/", HF_HOME: join(home, "none") }, { endpoint: "https://hf-mirror.example", token: undefined }],
    ["an HF_ENDPOINT with a path", { HF_ENDPOINT: "http://127.0.0.1:8080/hub", HF_TOKEN: "t" }, { endpoint: "http://127.0.0.1:8080/hub", token: "t" }],
    ["an HF_ENDPOINT that is no URL", { HF_ENDPOINT: "huggingface" }, "not a URL"],
    ["an HF_ENDPOINT of another scheme", { HF_ENDPOINT: "file:///etc" }, "http(s)"],
    ["an HF_ENDPOINT with credentials", { HF_ENDPOINT: "https://u:p@hub.example" }, "plain URL"],
  ];
  test.each(cases)("%s", (_label, env, expected) => {
    if (typeof expected === "string") expect(() => hubConfigFromEnv(env, home)).toThrow(expected);
    else expect(hubConfigFromEnv(env, home)).toEqual(expected);
  });
  test("a home with no token file: no token", () => expect(hubConfigFromEnv({}, join(home, "empty")).token).toBeUndefined());
});

describe("Hub URLs", () => {
  const hub: HubConfig = { endpoint: "https://huggingface.co", token: undefined };
  test.each([
    ["org/repo", "main", "m.gguf", "https://huggingface.co/org/repo/resolve/main/m.gguf"],
    ["org/repo", "v1.0", "sub dir/m#1.gguf", "https://huggingface.co/org/repo/resolve/v1.0/sub%20dir/m%231.gguf"],
  ])("resolve %s %s %s", (repo, rev, path, expected) => expect(resolveUrl(hub, repo, rev, path)).toBe(expected));
  test("tree", () => expect(treeUrl(hub, "org/repo", "main")).toBe("https://huggingface.co/api/models/org/repo/tree/main?recursive=true"));
});

describe("nextPage", () => {
  const base = "https://huggingface.co/api/models/o/r/tree/main?recursive=true";
  const cases: [string | null, string | undefined][] = [
    [null, undefined],
    ['<https://huggingface.co/api/models/o/r/tree/main?recursive=true&cursor=abc>; rel="next"', "https://huggingface.co/api/models/o/r/tree/main?recursive=true&cursor=abc"],
    ['</api/models/o/r/tree/main?cursor=2>; rel="next"', "https://huggingface.co/api/models/o/r/tree/main?cursor=2"],
    ['<https://x/prev>; rel="prev", <https://x/next>; rel=next', "https://x/next"],
    ['<https://x/last>; rel="last"', undefined],
    ["garbage", undefined],
  ];
  test.each(cases)("%p", (link, expected) => expect(nextPage(link, base)).toBe(expected));
});

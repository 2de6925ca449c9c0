/** The browser guard's decisions as a table: Host, Origin, Content-Type and preflights. */
import { describe, expect, test } from "bun:test";
import { browserVerdict, hostAllowed, hostName, type BrowserPolicy, type BrowserRequest } from "../../router/http/browser-guard.ts";

const LOOPBACK: BrowserPolicy = { listen: "127.0.0.1", corsOrigins: [] };
const WITH_CORS: BrowserPolicy = { listen: "127.0.0.1", corsOrigins: ["http://localhost:3000", "https://app.example"] };

describe("hostAllowed", () => {
  const cases: [host: string, listen: string, ok: boolean][] = [
    ["127.0.0.1:9337", "127.0.0.1", true],
    ["127.0.0.1", "127.0.0.1", true],
    ["127.8.9.10:1", "127.0.0.1", true],
    ["localhost:9337", "127.0.0.1", true],
    ["LOCALHOST:9337", "127.0.0.1", true],
    ["[::1]:9337", "127.0.0.1", true],
    ["rebind.attacker.example", "127.0.0.1", false],
    ["rebind.attacker.example:9337", "127.0.0.1", false],
    ["localhost.attacker.example", "127.0.0.1", false],
    ["127.0.0.1.nip.io:9337", "127.0.0.1", false],
    ["127.0.0.256", "127.0.0.1", false],
    ["192.168.1.5:9337", "127.0.0.1", false],
    ["192.168.1.5:9337", "192.168.1.5", true],
    ["192.168.1.5:80", "192.168.1.5", true],
    // Beyond loopback the network's names reach the node; its API keys guard it (Ollama's rule).
    ["192.168.1.6:9337", "192.168.1.5", true],
    ["gpu-box.lan:9337", "gpu-box.lan", true],
    ["[fe80::1]:9337", "fe80::1", true],
    ["[fe80::1]:9337", "[fe80::1]", true],
    ["10.0.0.7:9337", "0.0.0.0", true],
    ["[2001:db8::7]:9337", "::", true],
    ["gpu-box.lan:9337", "0.0.0.0", true],
    ["host.docker.internal:9337", "0.0.0.0", true],
    ["rebind.attacker.example", "::1", false],
    ["rebind.attacker.example", "localhost", false],
    ["rebind.attacker.example", "127.0.0.2", false],
    // Still a Host header, not anything: malformed ones are refused on any listen.
    ["a b", "0.0.0.0", false],
    ["user@127.0.0.1", "0.0.0.0", false],
    ["", "127.0.0.1", false],
    ["a b", "127.0.0.1", false],
    ["user@127.0.0.1", "127.0.0.1", false],
    ["127.0.0.1:port", "127.0.0.1", false],
  ];
  test.each(cases)("Host %p with --listen %p: %p", (host, listen, ok) => expect(hostAllowed(host, listen)).toBe(ok));
  test("hostName drops port and brackets", () => {
    expect(hostName("[::1]:80")).toBe("::1");
    expect(hostName("Example.COM:1")).toBe("example.com");
    expect(hostName("x:1:2")).toBeUndefined();
  });
});

describe("browserVerdict", () => {
  const req = (over: Partial<BrowserRequest>): BrowserRequest => ({ method: "GET", host: "127.0.0.1:9337", origin: null, contentType: null, path: "/v1/models", ...over });
  const json = "application/json";
  type Expect = "pass" | "preflight" | 403 | 415 | 421 | { allowOrigin: string };
  const cases: [what: string, request: Partial<BrowserRequest>, policy: BrowserPolicy, expected: Expect][] = [
    ["curl: no Origin", {}, LOOPBACK, "pass"],
    ["curl POST to /v1, any content type", { method: "POST", path: "/v1/chat/completions", contentType: "text/plain" }, LOOPBACK, "pass"],
    ["rebinding Host on GET /api/status", { host: "rebind.attacker.example", path: "/api/status" }, LOOPBACK, 421],
    ["rebinding Host on GET /v1/models", { host: "rebind.attacker.example:9337" }, LOOPBACK, 421],
    ["no Host at all", { host: null }, LOOPBACK, 421],
    ["Host checked before anything else", { host: "evil.example", method: "OPTIONS", origin: "http://localhost:3000" }, WITH_CORS, 421],
    ["foreign page, text/plain POST to /api/v1/load", { method: "POST", path: "/api/v1/load", origin: "https://evil.example", contentType: "text/plain" }, LOOPBACK, 403],
    ["foreign page, JSON POST to /v1", { method: "POST", path: "/v1/chat/completions", origin: "https://evil.example", contentType: json }, LOOPBACK, 403],
    ["Origin: null (sandboxed frame, file://)", { method: "POST", path: "/v1/completions", origin: "null" }, LOOPBACK, 403],
    ["foreign page DELETE", { method: "DELETE", path: "/api/v1/load", origin: "https://evil.example", contentType: json }, LOOPBACK, 403],
    ["foreign page GET: passes, but gets no CORS headers", { origin: "https://evil.example" }, LOOPBACK, "pass"],
    ["the node's own origin POSTs", { method: "POST", path: "/api/v1/unload", origin: "http://127.0.0.1:9337", contentType: json }, LOOPBACK, "pass"],
    ["own origin through localhost", { method: "POST", host: "localhost:9337", path: "/v1/completions", origin: "http://localhost:9337" }, LOOPBACK, "pass"],
    ["own host, other port is another origin", { method: "POST", path: "/v1/completions", origin: "http://127.0.0.1:8080" }, LOOPBACK, 403],
    ["https is another origin", { method: "POST", path: "/v1/completions", origin: "https://127.0.0.1:9337" }, LOOPBACK, 403],
    ["listed origin POSTs, gets its CORS header", { method: "POST", path: "/v1/chat/completions", origin: "http://localhost:3000", contentType: json }, WITH_CORS, { allowOrigin: "http://localhost:3000" }],
    ["listed origin GETs", { origin: "https://app.example" }, WITH_CORS, { allowOrigin: "https://app.example" }],
    ["listed origin, any case", { origin: "HTTPS://APP.EXAMPLE" }, WITH_CORS, { allowOrigin: "https://app.example" }],
    ["listed origin still needs JSON on /api", { method: "POST", path: "/api/v1/load", origin: "https://app.example", contentType: "text/plain" }, WITH_CORS, 415],
    ["preflight from a listed origin", { method: "OPTIONS", path: "/v1/chat/completions", origin: "http://localhost:3000" }, WITH_CORS, "preflight"],
    ["preflight from a foreign origin", { method: "OPTIONS", path: "/api/v1/load", origin: "https://evil.example" }, WITH_CORS, 403],
    ["preflight with no --cors-origin at all", { method: "OPTIONS", origin: "http://localhost:3000" }, LOOPBACK, 403],
    ["OPTIONS without an Origin", { method: "OPTIONS" }, LOOPBACK, 403],
    ["management POST needs JSON", { method: "POST", path: "/api/v1/load", contentType: "text/plain;charset=UTF-8" }, LOOPBACK, 415],
    ["management POST with no type", { method: "POST", path: "/api/v1/unload" }, LOOPBACK, 415],
    // Lemonade's "unload all" is a POST with nothing in it: no body, so no type to say.
    ["bodyless unload (curl -X POST)", { method: "POST", path: "/api/v1/unload", bodyless: true }, LOOPBACK, "pass"],
    ["bodyless unload under /api/v0 and /v0", { method: "POST", path: "/v0/unload", bodyless: true }, LOOPBACK, "pass"],
    ["bodyless unload from a foreign page", { method: "POST", path: "/api/v1/unload", origin: "https://evil.example", bodyless: true }, LOOPBACK, 403],
    ["bodyless unload from Origin: null", { method: "POST", path: "/api/v0/unload", origin: "null", bodyless: true }, LOOPBACK, 403],
    ["bodyless unload through a rebinding Host", { method: "POST", host: "rebind.attacker.example", path: "/api/v1/unload", bodyless: true }, LOOPBACK, 421],
    ["bodyless load: only unload means something without a body", { method: "POST", path: "/api/v1/load", bodyless: true }, LOOPBACK, 415],
    ["bodyless Ollama route", { method: "POST", path: "/api/delete", bodyless: true }, LOOPBACK, 415],
    ["a bodyless DELETE of unload", { method: "DELETE", path: "/api/v1/unload", bodyless: true }, LOOPBACK, 415],
    ["/v0 POSTs need JSON as /api ones do", { method: "POST", path: "/v0/load", contentType: "text/plain" }, LOOPBACK, 415],
    ["/v0 inference POSTs too", { method: "POST", path: "/v0/chat/completions", contentType: "text/plain" }, LOOPBACK, 415],
    ["form-encoded (curl -d) refused on /api", { method: "POST", path: "/api/v1/load", contentType: "application/x-www-form-urlencoded" }, LOOPBACK, 415],
    ["JSON with a charset", { method: "POST", path: "/api/v1/load", contentType: "Application/JSON; charset=utf-8" }, LOOPBACK, "pass"],
    ["GET on /api needs no type", { path: "/api/v1/health" }, LOOPBACK, "pass"],
  ];
  test.each(cases)("%s", (_, request, policy, expected) => {
    const v = browserVerdict(req(request), policy);
    if (typeof expected === "number") {
      expect(v.action).toBe("refuse");
      if (v.action === "refuse") expect(v.status).toBe(expected);
    } else if (typeof expected === "object") {
      expect(v).toEqual({ action: "pass", ...expected });
    } else {
      expect(v.action).toBe(expected);
      if (expected === "pass") expect(v).toEqual({ action: "pass" });
    }
  });

  test("refusals say what happened and what to do", () => {
    const r421 = browserVerdict(req({ host: "rebind.attacker.example" }), LOOPBACK);
    expect(r421).toMatchObject({ code: "misdirected_request", message: expect.stringContaining('"rebind.attacker.example"') });
    const r403 = browserVerdict(req({ method: "POST", origin: "https://evil.example" }), LOOPBACK);
    expect(r403).toMatchObject({ code: "origin_not_allowed", message: expect.stringContaining("--cors-origin https://evil.example") });
    const r415 = browserVerdict(req({ method: "POST", path: "/api/v1/load", contentType: "text/plain" }), LOOPBACK);
    expect(r415).toMatchObject({ code: "unsupported_media_type", message: expect.stringContaining("Content-Type: application/json") });
  });
});

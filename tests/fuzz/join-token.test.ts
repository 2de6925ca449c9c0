/**
 * Join tokens under fuzzing: whatever text a user pastes (garbage, a token with flipped bits, cut
 * short, with base64 noise), `decodeJoinToken` gives back a token the mesh accepts or a
 * JoinTokenError that says what to do; any valid contents survive encode then decode unchanged.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { SECRET_BYTES } from "../../mesh/identity.ts";
import { decodeJoinToken, encodeJoinToken, JoinTokenError, type JoinToken } from "../../mesh/join-token.ts";
import { MemberAddrSchema } from "../../mesh/messages.ts";
import { mutateText, mutation } from "./arbitraries.ts";
import { holds } from "./settings.ts";

const RUNS = 300;

/** What decoding must give: a token whose address the mesh's own schema accepts, or a clear refusal. */
function decodesCleanly(text: string): void {
  let token: JoinToken;
  try {
    token = decodeJoinToken(text);
  } catch (err) {
    expect(err).toBeInstanceOf(JoinTokenError);
    expect((err as Error).message).toStartWith("not a mesh join token (");
    expect((err as Error).message).toContain("copy the whole token that `mesh token` prints");
    return;
  }
  expect(token.secret.length).toBe(SECRET_BYTES);
  expect(MemberAddrSchema.safeParse(token.addr).success).toBe(true);
  expect(token.addr.addresses.length > 0 || token.addr.relayUrl !== undefined).toBe(true);
}

const text = fc.string({ unit: "binary", maxLength: 300 });
const base64urlText = fc.stringMatching(/^[A-Za-z0-9_-]{0,400}$/);

const validToken: fc.Arbitrary<JoinToken> = fc
  .record({
    nodeId: fc.string({ unit: "binary", minLength: 1, maxLength: 64 }),
    addresses: fc.array(fc.string({ unit: "binary", maxLength: 32 }), { maxLength: 32 }),
    relayUrl: fc.option(fc.webUrl({ withQueryParameters: true, withFragments: true }), { nil: undefined }),
    secret: fc.uint8Array({ minLength: SECRET_BYTES, maxLength: SECRET_BYTES }),
  })
  .filter((t) => t.addresses.length > 0 || t.relayUrl !== undefined)
  .map(({ secret, ...addr }) => ({ addr: addr.relayUrl === undefined ? { nodeId: addr.nodeId, addresses: addr.addresses } : addr, secret }))
  .filter((t) => MemberAddrSchema.safeParse(t.addr).success);

describe("join tokens, fuzzed", () => {
  test("arbitrary text: a token or a JoinTokenError", () => {
    holds(fc.property(text, (t) => decodesCleanly(t)), { runs: RUNS });
  });

  test("the prefix and then arbitrary base64url: a token or a JoinTokenError", () => {
    holds(fc.property(base64urlText, (t) => decodesCleanly(`mesh1${t}`)), { runs: RUNS });
  });

  test("the prefix and arbitrary JSON, encoded: a token or a JoinTokenError", () => {
    const json = fc.oneof(
      fc.jsonValue(),
      fc.record({ n: fc.jsonValue(), a: fc.jsonValue(), r: fc.jsonValue(), s: fc.jsonValue() }, { requiredKeys: [] }),
    );
    holds(fc.property(json, (j) => decodesCleanly(`mesh1${Buffer.from(JSON.stringify(j) ?? "").toString("base64url")}`)), { runs: RUNS });
  });

  test("valid contents round-trip through encode and decode", () => {
    holds(
      fc.property(validToken, (t) => {
        expect(decodeJoinToken(encodeJoinToken(t))).toEqual(t);
      }),
      { runs: RUNS },
    );
  });

  test("a valid token, mutated (bit flips, truncation, inserted noise): the same token, another valid one, or a JoinTokenError", () => {
    holds(
      fc.property(validToken, fc.array(mutation, { minLength: 1, maxLength: 4 }), (t, ms) => decodesCleanly(mutateText(encodeJoinToken(t), ms))),
      { runs: RUNS },
    );
  });

  test("a valid token with its payload's JSON mutated: a token or a JoinTokenError", () => {
    holds(
      fc.property(validToken, fc.array(mutation, { minLength: 1, maxLength: 4 }), (t, ms) => {
        const json = Buffer.from(encodeJoinToken(t).slice("mesh1".length), "base64url").toString("utf8");
        decodesCleanly(`mesh1${Buffer.from(mutateText(json, ms)).toString("base64url")}`);
      }),
      { runs: RUNS },
    );
  });
});

describe("join token refusals", () => {
  const b64 = (o: unknown) => `mesh1${Buffer.from(JSON.stringify(o)).toString("base64url")}`;
  const secret = Buffer.alloc(SECRET_BYTES, 7).toString("base64url");

  test("a relay URL longer than a member address may carry is refused, not accepted", () => {
    const long = `https://relay.example/${"a".repeat(300)}`;
    expect(() => decodeJoinToken(b64({ n: "x", a: [], r: long, s: secret }))).toThrow(JoinTokenError);
  });

  test("every refusal is a JoinTokenError", () => {
    for (const t of ["", "mesh1", "mesh1%%%", b64(null), b64({ n: "x", a: [], s: secret })]) {
      expect(() => decodeJoinToken(t)).toThrow(JoinTokenError);
    }
  });
});

/**
 * Issue 45: every error from an iroh binding reaches the log as one line. With RUST_BACKTRACE set
 * (as on many developers' machines) the binding's errors carry a Rust backtrace; a failed join
 * retry logged all of it. `irohReason` keeps the message and its causes on one line, and
 * `oneLine` is what each binding call of both lines goes through.
 */
import { expect, test } from "bun:test";
import { irohReason, oneLine } from "../../mesh/transport-kit.ts";

const BACKTRACE = `Stack backtrace:
   0: anyhow::error::<impl anyhow::Error>::msg
             at /root/.cargo/registry/src/index.crates.io/anyhow-1.0.98/src/error.rs:83:36
   1: iroh::endpoint::Endpoint::connect::{{closure}}
             at /root/.cargo/registry/src/index.crates.io/iroh-1.1.0/src/endpoint.rs:702:13
   2: tokio::runtime::task::core::Core<T,S>::poll`;

test.each([
  ["a message alone", "connection lost", "connection lost"],
  ["a message and its backtrace", `Failed to connect\n\n${BACKTRACE}`, "Failed to connect"],
  ["causes on their lines, then the backtrace", `Failed to connect\n\nCaused by:\n    0: no addressing information available\n    1: relay disabled\n\n${BACKTRACE}`, "Failed to connect: 0: no addressing information available 1: relay disabled"],
  ["a message spread over lines", "timed out\n  while dialing", "timed out while dialing"],
])("%s becomes one line", (_, message, line) => {
  expect(irohReason(new Error(message))).toBe(line);
  expect(irohReason(new Error(message))).not.toContain("\n");
});

test("a binding call's failure rejects with an Error of one line; a success passes through", async () => {
  expect(await oneLine(() => Promise.resolve(42))).toBe(42);
  const err = await oneLine(() => Promise.reject(new Error(`Failed to connect\n\n${BACKTRACE}`))).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(Error);
  expect((err as Error).message).toBe("Failed to connect");
});

test("a binding call that throws before it returns a promise (a key it cannot parse) fails as one line too", async () => {
  const err = await oneLine(() => {
    throw new Error(`data is not a valid public key\n\n${BACKTRACE}`);
  }).catch((e: unknown) => e);
  expect((err as Error).message).toBe("data is not a valid public key");
});

test("what is not an Error (a napi string) is made one line too", () => {
  expect(irohReason(`closed by peer: duplicate\n${BACKTRACE}`)).toBe("closed by peer: duplicate");
});

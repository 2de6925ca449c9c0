/** A TCP port on 127.0.0.1 that was free a moment ago, for children that cannot take port 0. */
export function freePort(): number {
  const server = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = server.port;
  server.stop(true);
  return port;
}

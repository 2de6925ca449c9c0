/**
 * A QUIC stream and connection as every floor above this one sees them: the mesh's transport lines
 * (`mesh/transport-iroh*.ts`) implement these, and framing (`wire.ts`), read deadlines
 * (`read-deadline.ts`), tunnels and model transfers use them without knowing which line is under.
 */
export interface SendSide {
  writeAll(bytes: Uint8Array): Promise<void>;
  finish(): Promise<void>;
  reset(code: number): Promise<void>;
}

export interface RecvSide {
  /** Bytes read into `buf`, or null at the end of the stream. */
  read(buf: Uint8Array): Promise<number | null>;
  readExact(buf: Uint8Array): Promise<void>;
  stop(code: number): Promise<void>;
}

export interface Stream {
  send: SendSide;
  recv: RecvSide;
}

/** A connection to a peer, its id proved by QUIC's handshake. */
export interface PeerConnection {
  readonly remoteId: string;
  /** Resolves with the reason once the connection is closed, by either side or by a timeout. */
  readonly closed: Promise<string>;
  openStream(): Promise<Stream>;
  acceptStream(): Promise<Stream>;
  /** Round-trip time in milliseconds, as QUIC estimates it. */
  rttMs(): number;
  /**
   * UDP datagrams sent and received on this connection so far, where the transport counts them
   * (iroh 1.x does; 0.35's binding does not): any datagram from a peer shows it alive, so a
   * heartbeat need not repeat what QUIC's own packets already say.
   */
  datagrams?(): { sent: number; received: number };
  close(code: number, reason: string): void;
}

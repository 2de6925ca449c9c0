/**
 * The certificate of this node's direct RPC path: a fresh self-signed ECDSA P-256 certificate per
 * start. Nobody checks it against a CA; peers pin its SHA-256, which they learn from our
 * announcement on the authenticated mesh connection.
 */
import "reflect-metadata";
import * as x509 from "@peculiar/x509";

export interface DirectIdentity {
  keyPem: string;
  certPem: string;
  /** Lowercase hex SHA-256 of the DER certificate, as peers pin it. */
  certSha256: string;
}

export async function makeDirectIdentity(): Promise<DirectIdentity> {
  const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
  const keys = await crypto.subtle.generateKey(alg, true, ["sign", "verify"]);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: Date.now().toString(16),
    name: "CN=mesh direct rpc",
    notBefore: new Date(Date.now() - 86_400_000),
    notAfter: new Date(Date.now() + 3650 * 86_400_000),
    keys,
    signingAlgorithm: alg,
  });
  const pkcs8 = Buffer.from(await crypto.subtle.exportKey("pkcs8", keys.privateKey)).toString("base64");
  const keyPem = `-----BEGIN PRIVATE KEY-----\n${pkcs8.match(/.{1,64}/g)!.join("\n")}\n-----END PRIVATE KEY-----\n`;
  return { keyPem, certPem: cert.toString("pem"), certSha256: Buffer.from(await cert.getThumbprint("SHA-256")).toString("hex") };
}

/** `AB:CD:...` (node's fingerprint256) to the lowercase hex we announce. */
export const normalizeFingerprint = (fp: string | undefined): string => (fp ?? "").replace(/:/g, "").toLowerCase();

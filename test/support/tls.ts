// A throwaway PKI made with the openssl CLI: a test CA and server
// certificates that are valid, expired, or for another name.

import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { tempDir } from './agent-process.js';

export interface TestPki {
  dir: string;
  caCert: string;
  /** CN/SAN localhost and 127.0.0.1, valid now. */
  valid: { cert: string; key: string };
  /** Same names, validity in January 2020. */
  expired: { cert: string; key: string };
  /** Valid now, but only for other.test. */
  wrongName: { cert: string; key: string };
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

export function createTestPki(): TestPki {
  const dir = tempDir('outpost-pki-');
  const db = path.join(dir, 'db');
  mkdirSync(db);
  writeFileSync(path.join(db, 'index.txt'), '');
  writeFileSync(path.join(db, 'serial'), '01\n');
  writeFileSync(
    path.join(dir, 'ca.cnf'),
    `[ca]
default_ca = test
[test]
database = db/index.txt
serial = db/serial
new_certs_dir = db
policy = any
default_md = sha256
copy_extensions = none
unique_subject = no
[any]
commonName = supplied
[local]
subjectAltName = DNS:localhost,IP:127.0.0.1
[other]
subjectAltName = DNS:other.test
`,
  );
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(dir, ['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '30', '-subj', '/CN=Outpost Test CA']);
  const issue = (name: string, cn: string, extensions: string, dates: string[]) => {
    openssl(dir, ['req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`]);
    openssl(dir, ['ca', '-batch', '-config', 'ca.cnf', '-cert', 'ca.crt', '-keyfile', 'ca.key', '-in', `${name}.csr`, '-out', `${name}.crt`, '-extensions', extensions, '-notext', ...dates]);
    return { cert: path.join(dir, `${name}.crt`), key: path.join(dir, `${name}.key`) };
  };
  return {
    dir,
    caCert: path.join(dir, 'ca.crt'),
    valid: issue('valid', 'localhost', 'local', ['-days', '30']),
    expired: issue('expired', 'localhost', 'local', ['-startdate', '20200101000000Z', '-enddate', '20200201000000Z']),
    wrongName: issue('wrong', 'other.test', 'other', ['-days', '30']),
  };
}

export interface ClientCertificateFiles {
  cert: string;
  /** The key, unencrypted. */
  key: string;
  /** The same key, encrypted with `passphrase`. */
  encryptedKey: string;
  passphrase: string;
  /** A self-signed certificate and its key: no CA the server trusts issued it. */
  selfSigned: { cert: string; key: string };
}

/** A client certificate (extendedKeyUsage clientAuth) issued by the PKI's CA, its key also encrypted. */
export function issueClientCertificate(pki: TestPki, passphrase = 'mtls-pass-phrase-7Qz'): ClientCertificateFiles {
  const dir = pki.dir;
  writeFileSync(path.join(dir, 'client.cnf'), '[client]\nextendedKeyUsage = clientAuth\n');
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(dir, ['req', ...ec, '-keyout', 'client.key', '-out', 'client.csr', '-subj', '/CN=outpost-client']);
  openssl(dir, ['x509', '-req', '-in', 'client.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-set_serial', '4242', '-days', '30', '-extfile', 'client.cnf', '-extensions', 'client', '-out', 'client.crt']);
  openssl(dir, ['pkey', '-in', 'client.key', '-aes256', '-passout', `pass:${passphrase}`, '-out', 'client-enc.key']);
  openssl(dir, ['req', '-x509', ...ec, '-keyout', 'stranger.key', '-out', 'stranger.crt', '-days', '30', '-subj', '/CN=stranger']);
  return {
    cert: path.join(dir, 'client.crt'),
    key: path.join(dir, 'client.key'),
    encryptedKey: path.join(dir, 'client-enc.key'),
    passphrase,
    selfSigned: { cert: path.join(dir, 'stranger.crt'), key: path.join(dir, 'stranger.key') },
  };
}

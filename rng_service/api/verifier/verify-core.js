// Fairshoe's player verifier: the checks, with WebCrypto alone (Ed25519, HMAC-SHA256, SHA-256).
// Plain JavaScript, nothing to build. Each function here does exactly what the Python does:
//   JCS and the signed envelope      rng_service/crypto/signing.py
//   key ids and JWKs                 rng_service/crypto/keys.py
//   HMAC_DRBG (SP 800-90A 10.1.2)    rng_service/rng/drbg.py
//   draws and Fisher-Yates           rng_service/rng/sampling.py (128-byte generate blocks)
//   the shoe and its commitment      rng_service/rng/shoe.py, game_math/cards.py
//   RFC 9162 hashing and proofs      rng_service/log/hashing.py, proofs.py
//   signed notes and checkpoints     rng_service/log/note.py, checkpoint.py
//   witness cosignatures             rng_service/log/cosignature.py
// tests/api/test_verifier_page.py holds this file to the Python on the CAVP vectors and on
// 1,000 shoes, and runs the page in a real Chromium on rounds of a real server.
"use strict";
(function (root) {
  const subtle = root.crypto && root.crypto.subtle;
  const enc = new TextEncoder();
  const EMPTY = new Uint8Array(0);

  // --- bytes -----------------------------------------------------------------------------------

  function utf8(text) { return enc.encode(text); }

  function concat(...parts) {
    let size = 0;
    for (const p of parts) size += p.length;
    const out = new Uint8Array(size);
    let at = 0;
    for (const p of parts) { out.set(p, at); at += p.length; }
    return out;
  }

  function hex(bytes) {
    let out = "";
    for (const b of bytes) out += b.toString(16).padStart(2, "0");
    return out;
  }

  function unhex(text, what) {
    if (typeof text !== "string" || !/^([0-9a-f]{2})*$/.test(text)) {
      throw new Error(`${what} is not lowercase hex`);
    }
    const out = new Uint8Array(text.length / 2);
    for (let i = 0; i < out.length; i++) out[i] = parseInt(text.substr(2 * i, 2), 16);
    return out;
  }

  function equal(a, b) {
    if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
    return true;
  }

  const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

  function b64encode(bytes) {
    let out = "";
    for (let i = 0; i < bytes.length; i += 3) {
      const n = (bytes[i] << 16) | ((bytes[i + 1] || 0) << 8) | (bytes[i + 2] || 0);
      out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63];
      out += i + 1 < bytes.length ? B64[(n >> 6) & 63] : "=";
      out += i + 2 < bytes.length ? B64[n & 63] : "=";
    }
    return out;
  }

  // Standard padded base64 with one spelling per byte string (as the Python's strict decoder).
  function b64decode(text, what) {
    if (typeof text !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4) {
      throw new Error(`${what} is not base64`);
    }
    const bin = atob(text);
    const out = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    if (b64encode(out) !== text) throw new Error(`${what} is not canonical base64`);
    return out;
  }

  function b64urlEncode(bytes) {
    return b64encode(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  // Unpadded base64url with one spelling (a signature value, a JWK's x).
  function b64urlDecode(text, what) {
    if (typeof text !== "string" || !/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) {
      throw new Error(`${what} is not unpadded base64url`);
    }
    const std = text.replace(/-/g, "+").replace(/_/g, "/");
    const out = b64decode(std + "=".repeat((4 - (std.length % 4)) % 4), what);
    if (b64urlEncode(out) !== text) throw new Error(`${what} is not canonical base64url`);
    return out;
  }

  async function sha256(bytes) { return new Uint8Array(await subtle.digest("SHA-256", bytes)); }

  // --- canonical JSON (RFC 8785) and the signed envelope -------------------------------------

  const MAX_INT = 2 ** 53 - 1;

  // JCS within the signed records' domain: integers within ±(2**53 - 1), no floats. Strings are
  // written by JSON.stringify (ECMAScript's serialisation is JCS's) and keys sorted by UTF-16
  // code units, which is what Array.prototype.sort compares.
  function canonical(value, path = "$") {
    if (value === null || value === true || value === false) return String(value);
    if (typeof value === "number") {
      if (!Number.isInteger(value) || Math.abs(value) > MAX_INT) {
        throw new Error(`${path}: ${value} is not an integer within ±(2**53 - 1)`);
      }
      return String(value === 0 ? 0 : value);
    }
    if (typeof value === "string") return JSON.stringify(value);
    if (Array.isArray(value)) {
      return "[" + value.map((v, i) => canonical(v, `${path}[${i}]`)).join(",") + "]";
    }
    if (typeof value === "object") {
      const keys = Object.keys(value).sort();
      return "{" + keys.map((k) => JSON.stringify(k) + ":" + canonical(value[k], `${path}.${k}`))
        .join(",") + "}";
    }
    throw new Error(`${path}: ${typeof value} is not a JSON value`);
  }

  const FORMAT = "fairshoe.signed/v1";

  // The structure of an envelope, as rng_service.crypto.signing checks it; throws naming the
  // field. Returns {payload, keyId, signature}.
  function envelopeParts(envelope) {
    if (!envelope || typeof envelope !== "object" || Array.isArray(envelope)) {
      throw new Error("not a JSON object");
    }
    const fields = Object.keys(envelope).sort().join(",");
    if (fields !== "format,payload,signature") {
      throw new Error(`the envelope's fields are ${fields}, not format, payload, signature`);
    }
    if (envelope.format !== FORMAT) throw new Error(`unsupported format ${envelope.format}`);
    const sig = envelope.signature;
    if (!sig || typeof sig !== "object" || Object.keys(sig).sort().join(",") !== "alg,key_id,value") {
      throw new Error("signature must hold exactly alg, key_id and value");
    }
    if (sig.alg !== "Ed25519") throw new Error(`unsupported signature alg ${sig.alg}`);
    if (typeof sig.key_id !== "string") throw new Error("signature.key_id is not a string");
    const signature = b64urlDecode(sig.value, "signature.value");
    if (signature.length !== 64) throw new Error("signature.value is not 64 bytes");
    const payload = envelope.payload;
    if (!payload || typeof payload !== "object" || Array.isArray(payload)) {
      throw new Error("payload is not an object");
    }
    return { payload, keyId: sig.key_id, signature };
  }

  // --- keys ------------------------------------------------------------------------------------

  async function ed25519Key(raw) {
    return subtle.importKey("raw", raw, { name: "Ed25519" }, false, ["verify"]);
  }

  async function ed25519Verify(raw, signature, message) {
    try {
      return await subtle.verify({ name: "Ed25519" }, await ed25519Key(raw), signature, message);
    } catch (err) {
      return false;  // a key WebCrypto refuses verifies nothing
    }
  }

  // The keys of a JWK Set (or one JWK), each {keyId, raw, validFrom, validUntil}. The key id is
  // computed from the key ("ed25519:" + SHA-256(raw)[:16] in hex), never read from its kid.
  async function loadJwks(doc) {
    const list = doc && Array.isArray(doc.keys) ? doc.keys : [doc];
    const keys = [];
    for (const [i, jwk] of list.entries()) {
      if (!jwk || jwk.kty !== "OKP" || jwk.crv !== "Ed25519") {
        throw new Error(`key ${i} is not an Ed25519 JWK`);
      }
      const raw = b64urlDecode(jwk.x, `key ${i} x`);
      if (raw.length !== 32) throw new Error(`key ${i} is not 32 bytes`);
      const keyId = "ed25519:" + hex(await sha256(raw)).slice(0, 32);
      keys.push({ keyId, raw, validFrom: jwk.valid_from || null, validUntil: jwk.valid_until || null });
    }
    return keys;
  }

  // {ok, keyId, error}: whether a trusted key signed the envelope (parsed JSON).
  async function verifyEnvelope(envelope, keys, schema) {
    let parts;
    try {
      parts = envelopeParts(envelope);
    } catch (err) {
      return { ok: false, error: `malformed envelope: ${err.message}` };
    }
    const key = keys.find((k) => k.keyId === parts.keyId);
    if (!key) {
      return { ok: false, keyId: parts.keyId,
               error: `signed by ${parts.keyId}, which is not among the ${keys.length} trusted key(s)` };
    }
    let message;
    try {
      message = utf8(FORMAT + "\n" + canonical(parts.payload, "payload"));
    } catch (err) {
      return { ok: false, keyId: parts.keyId, error: `not canonical: ${err.message}` };
    }
    if (!(await ed25519Verify(key.raw, parts.signature, message))) {
      return { ok: false, keyId: parts.keyId, error: `the signature does not verify under key ${parts.keyId}` };
    }
    if (schema && parts.payload.schema !== schema) {
      return { ok: false, keyId: parts.keyId, error: `its schema is ${parts.payload.schema}, not ${schema}` };
    }
    return { ok: true, keyId: parts.keyId, key };
  }

  // --- HMAC_DRBG(SHA-256), SP 800-90A rev1 10.1.2, no prediction resistance ---------------------

  async function hmacKey(raw) {
    return subtle.importKey("raw", raw, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  }

  async function hmac(key, data) { return new Uint8Array(await subtle.sign("HMAC", key, data)); }

  class HmacDrbg {
    // await HmacDrbg.create(entropy, nonce, personalization): instantiate (10.1.2.3)
    static async create(entropyInput, nonce, personalization = EMPTY) {
      const drbg = new HmacDrbg();
      drbg.key = await hmacKey(new Uint8Array(32));
      drbg.value = new Uint8Array(32).fill(1);
      await drbg.update(concat(entropyInput, nonce, personalization));
      drbg.reseedCounter = 1;
      return drbg;
    }

    async update(data) {  // HMAC_DRBG_Update (10.1.2.2)
      this.key = await hmacKey(await hmac(this.key, concat(this.value, [0], data)));
      this.value = await hmac(this.key, this.value);
      if (data.length) {
        this.key = await hmacKey(await hmac(this.key, concat(this.value, [1], data)));
        this.value = await hmac(this.key, this.value);
      }
    }

    async reseed(entropyInput, additionalInput = EMPTY) {  // 10.1.2.4
      await this.update(concat(entropyInput, additionalInput));
      this.reseedCounter = 1;
    }

    async generate(nBytes, additionalInput = EMPTY) {  // 10.1.2.5
      if (additionalInput.length) await this.update(additionalInput);
      const out = new Uint8Array(Math.ceil(nBytes / 32) * 32);
      let value = this.value;
      for (let at = 0; at < out.length; at += 32) {
        value = await hmac(this.key, value);
        out.set(value, at);
      }
      this.value = value;
      await this.update(additionalInput);
      this.reseedCounter += 1;
      return out.slice(0, nBytes);
    }
  }

  // --- draws: rejection sampling over 128-byte blocks, forward Fisher-Yates --------------------

  const BLOCK_BYTES = 128;

  function bitLength(n) { let k = 0; while (n > 0) { k++; n = Math.floor(n / 2); } return k; }

  // The byte stream of sampling.py's DrbgRandom: generate(128) blocks, unread bytes carried.
  class DrbgStream {
    constructor(drbg) { this.drbg = drbg; this.buf = EMPTY; this.pos = 0; }

    async take(n) {
      while (this.buf.length - this.pos < n) {
        this.buf = concat(this.buf.subarray(this.pos), await this.drbg.generate(BLOCK_BYTES));
        this.pos = 0;
      }
      const out = this.buf.subarray(this.pos, this.pos + n);
      this.pos += n;
      return out;
    }

    // randbelow(n): k = bit length of n - 1, the next ceil(k/8) bytes big-endian, the low k bits;
    // a value >= n is rejected (never reduced) and the next bytes drawn.
    async randbelow(n) {
      if (!Number.isSafeInteger(n) || n < 1 || n > 2 ** 32) throw new Error(`randbelow(${n})`);
      const k = bitLength(n - 1), size = Math.ceil(k / 8), modulus = 2 ** k;
      for (;;) {
        let value = 0;
        for (const b of await this.take(size)) value = value * 256 + b;
        value %= modulus;
        if (value < n) return value;
      }
    }

    // for i from 0 to len - 2: j = i + randbelow(len - i), swap i and j
    async shuffle(items) {
      for (let i = 0; i < items.length - 1; i++) {
        const j = i + (await this.randbelow(items.length - i));
        const t = items[i]; items[i] = items[j]; items[j] = t;
      }
      return items;
    }
  }

  // --- the shoe ----------------------------------------------------------------------------------

  const RANKS = "A23456789TJQK", SUITS = "SHDC";
  const CLIENT_SEED_DOMAIN = utf8("fairshoe/client-seed/v2\0");
  const SHOE_PERSONALIZATION = utf8("fairshoe/shoe/v2\0");
  const COMMITMENT_DOMAIN = utf8("fairshoe/seed-commitment/v1\0");

  function cardCode(card) { return RANKS[card % 13] + SUITS[Math.floor(card / 13)]; }

  // The shoe's cards in dealing order (codes such as "KS"), from the 48-byte seed, the client
  // seed and the deck count: entropy input = seed[0:32], nonce = seed[32:48], personalization =
  // "fairshoe/shoe/v2\0" || decks (4 bytes, big-endian) || SHA-256("fairshoe/client-seed/v2\0" ||
  // client seed); the ordered shoe (deck after deck, S H D C, A..K) shuffled by the stream.
  async function shoeCards(seed, clientSeed, decks) {
    if (seed.length !== 48) throw new Error(`the seed has ${seed.length} bytes, not 48`);
    if (clientSeed.length > 256) throw new Error("the client seed is over 256 bytes");
    if (!Number.isInteger(decks) || decks < 1 || decks > 16) throw new Error(`decks ${decks}`);
    const digest = await sha256(concat(CLIENT_SEED_DOMAIN, clientSeed));
    const count = new Uint8Array([decks >>> 24, (decks >>> 16) & 255, (decks >>> 8) & 255, decks & 255]);
    const drbg = await HmacDrbg.create(seed.subarray(0, 32), seed.subarray(32, 48),
                                       concat(SHOE_PERSONALIZATION, count, digest));
    const cards = [];
    for (let d = 0; d < decks; d++) for (let c = 0; c < 52; c++) cards.push(c);
    await new DrbgStream(drbg).shuffle(cards);
    return cards.map(cardCode);
  }

  async function seedCommitment(seed) { return hex(await sha256(concat(COMMITMENT_DOMAIN, seed))); }

  // --- the log: RFC 9162 hashes and inclusion proofs -----------------------------------------

  async function leafHash(entry) { return sha256(concat([0], entry)); }
  async function nodeHash(left, right) { return sha256(concat([1], left, right)); }

  // RFC 9162 2.1.3.2, step for step; throws saying why the proof does not prove it.
  async function verifyInclusion(leaf, index, size, proof, rootHash) {
    if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) {
      throw new Error(`leaf ${index} is not in a tree of ${size}`);
    }
    if (!Array.isArray(proof) || proof.length > 64) throw new Error("the proof is not a list of hashes");
    let fn = index, sn = size - 1, r = leaf;
    for (const [i, text] of proof.entries()) {
      const p = unhex(text, `proof[${i}]`);
      if (p.length !== 32) throw new Error(`proof[${i}] is not 32 bytes`);
      if (sn === 0) throw new Error(`the proof has the wrong number of hashes (${proof.length})`);
      if (fn % 2 === 1 || fn === sn) {
        r = await nodeHash(p, r);
        while (fn !== 0 && fn % 2 === 0) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); }
      } else {
        r = await nodeHash(r, p);
      }
      fn = Math.floor(fn / 2); sn = Math.floor(sn / 2);
    }
    if (sn !== 0) throw new Error(`the proof has the wrong number of hashes (${proof.length})`);
    if (!equal(r, rootHash)) throw new Error(`it does not lead to the checkpoint's root (tree of ${size})`);
  }

  // --- checkpoints and cosignatures (C2SP signed-note, tlog-checkpoint, tlog-cosignature) -----

  const SIG_PREFIX = "\u2014 ";

  // {text, origin, size, root, time, signatures: [{name, keyId (4 bytes), sig}]}, unverified.
  function parseCheckpoint(note) {
    if (typeof note !== "string" || !note.endsWith("\n")) throw new Error("the note does not end in a newline");
    const cut = note.lastIndexOf("\n\n");
    if (cut < 0) throw new Error("the note has no signatures");
    const text = note.slice(0, cut + 1);
    const lines = text.slice(0, -1).split("\n");
    if (lines.length < 3 || lines.length > 4) throw new Error("a checkpoint has 3 or 4 lines");
    const [origin, sizeLine, rootLine] = lines;
    if (!/^(0|[1-9][0-9]{0,15})$/.test(sizeLine)) throw new Error("the tree size is not a number");
    const root = b64decode(rootLine, "the root hash");
    if (root.length !== 32) throw new Error("the root hash is not 32 bytes");
    if (lines.length === 4 && !/^time \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/.test(lines[3])) {
      throw new Error("unknown extension line");
    }
    const signatures = note.slice(cut + 2, -1).split("\n").map((line) => {
      if (!line.startsWith(SIG_PREFIX)) throw new Error("not a signature line");
      const [name, blob] = line.slice(SIG_PREFIX.length).split(" ");
      const raw = b64decode(blob || "", "a signature");
      if (raw.length <= 4) throw new Error("a signature is too short");
      return { name, keyId: raw.subarray(0, 4), sig: raw.subarray(4) };
    });
    return { text, origin, size: Number(sizeLine), root, time: lines[3] ? lines[3].slice(5) : null,
             signatures };
  }

  // The note key id: SHA-256(name || "\n" || alg || key)[:4] (0x01 a log's key, 0x04 a witness's).
  async function noteKeyId(name, alg, raw) {
    return (await sha256(concat(utf8(name + "\n"), [alg], raw))).subarray(0, 4);
  }

  // The checkpoint once a trusted key has signed it under its origin's name; throws otherwise.
  async function verifyCheckpoint(note, keys) {
    const cp = parseCheckpoint(note);
    let signedBy = null;
    for (const line of cp.signatures) {
      if (line.name !== cp.origin) continue;
      for (const key of keys) {
        if (!equal(line.keyId, await noteKeyId(cp.origin, 1, key.raw))) continue;
        if (line.sig.length !== 64 || !(await ed25519Verify(key.raw, line.sig, utf8(cp.text)))) {
          throw new Error(`the signature of ${key.keyId} on it does not verify`);
        }
        signedBy = key.keyId;
      }
    }
    if (!signedBy) throw new Error(`no trusted key signed it as the log ${cp.origin}`);
    return Object.assign(cp, { signedBy });
  }

  // A witness vkey: <name>+<key id hex>+base64(0x04 || 32-byte key).
  async function parseWitnessKey(vkey) {
    // split twice: the base64 key material may itself hold a "+"
    const text = String(vkey).trim(), a = text.indexOf("+"), b = text.indexOf("+", a + 1);
    if (a < 1 || b < 0) throw new Error(`not a witness key: ${text}`);
    const name = text.slice(0, a), idHex = text.slice(a + 1, b), material = text.slice(b + 1);
    const raw = b64decode(material, "the witness key");
    if (raw.length !== 33 || raw[0] !== 4) throw new Error(`not an Ed25519 cosignature/v1 key: ${name}`);
    const id = await noteKeyId(name, 4, raw.subarray(1));
    if (hex(id) !== idHex) throw new Error(`the key id of ${name} does not match its key`);
    return { name, keyId: id, raw: raw.subarray(1) };
  }

  // Each cosignature line of a known witness: {name, ok, timestamp, error}. Lines of other keys
  // are listed as unknown (not checked): their witness's key is needed to check them.
  async function verifyCosignatures(cp, witnesses) {
    const found = [];
    for (const line of cp.signatures) {
      if (line.name === cp.origin) continue;
      const w = witnesses.find((k) => k.name === line.name && equal(k.keyId, line.keyId));
      if (!w) { found.push({ name: line.name, ok: null }); continue; }
      if (line.sig.length !== 72) { found.push({ name: w.name, ok: false, error: "malformed" }); continue; }
      let ts = 0n;
      for (const b of line.sig.subarray(0, 8)) ts = ts * 256n + BigInt(b);
      const message = utf8(`cosignature/v1\ntime ${ts}\n${cp.text}`);
      const ok = await ed25519Verify(w.raw, line.sig.subarray(8), message);
      found.push({ name: w.name, ok, timestamp: Number(ts), source: w.source,
                   error: ok ? null : "does not verify" });
    }
    return found;
  }

  root.FairshoeVerify = {
    utf8, hex, unhex, b64decode, b64urlDecode, sha256, canonical, envelopeParts, loadJwks,
    verifyEnvelope, HmacDrbg, DrbgStream, shoeCards, seedCommitment, cardCode, leafHash,
    nodeHash, verifyInclusion, parseCheckpoint, verifyCheckpoint, parseWitnessKey,
    verifyCosignatures, hasWebCrypto: Boolean(subtle),
  };
})(globalThis);

// --- one round, end to end --------------------------------------------------------------------
// checkRound(evidence, keys, witnessKeys, {log, roundId}) -> {verdict: "pass" | "fail" | "open",
// logged (whether a checkpoint was checked), checks, cards, record}.
// evidence is the server's fairshoe.round-evidence/v1 document (or what the player dropped, in
// its shape): record {envelope (text), leaf_index, proof}, commitment, reveal (null: the shoe
// is still in play), checkpoint. Each check is {id, title, ok: true | false | null (not
// checked), detail}; every check runs even after one fails, so each failure is named.
(function (root) {
  const V = root.FairshoeVerify;

  function parse(text, what) {
    try { return JSON.parse(text); } catch (err) { throw new Error(`the ${what} is not JSON`); }
  }

  function secondOf(stamp) {  // RFC 3339 -> whole seconds (keys are kept to the second)
    const t = Date.parse(stamp);
    return Number.isNaN(t) ? null : Math.floor(t / 1000);
  }

  async function checkRound(evidence, keys, witnessKeys = [], options = {}) {
    const checks = [];
    const add = (id, title, ok, detail) => checks.push({ id, title, ok, detail });
    let record = null, reveal = null, commitment = null, cards = [];

    // the record and its signature
    try {
      const envelope = parse(evidence.record.envelope, "record");
      const got = await V.verifyEnvelope(envelope, keys, "fairshoe.round/v1");
      record = envelope.payload && typeof envelope.payload === "object" ? envelope.payload : null;
      if (got.ok && record && got.key.validFrom) {
        const at = secondOf(record.started_at), from = secondOf(got.key.validFrom);
        const until = got.key.validUntil ? secondOf(got.key.validUntil) : null;
        if (at === null || at < from || (until !== null && at > until)) {
          got.ok = false;
          got.error = `it is dated ${record.started_at}, outside the validity of key ${got.keyId}`;
        }
      }
      if (got.ok && record && options.roundId && record.round_id !== options.roundId) {
        got.ok = false;
        got.error = `it is the record of round ${record.round_id}, not of the round asked for, ${options.roundId}`;
      }
      add("record-signature", "Round record signed by the operator", got.ok,
          got.ok ? `signed by ${got.keyId}` : `The record's signature fails: ${got.error}`);
    } catch (err) {
      add("record-signature", "Round record signed by the operator", false, err.message);
    }
    const shoe = record && record.shoe && typeof record.shoe === "object" ? record.shoe : {};

    // the shoe's commitment leaf (logged when the shoe was made)
    if (evidence.commitment) {
      try {
        const envelope = parse(evidence.commitment.envelope, "shoe commitment");
        const got = await V.verifyEnvelope(envelope, keys, "fairshoe.shoe-commitment/v1");
        commitment = envelope.payload;
        const same = commitment.shoe_id === shoe.id && commitment.commitment === shoe.commitment
          && commitment.decks === shoe.decks;
        add("commitment-signature", "Shoe commitment signed by the operator", got.ok && same,
            !got.ok ? `The shoe commitment's signature fails: ${got.error}`
              : same ? `shoe ${shoe.id}: ${shoe.decks} decks, commitment ${shoe.commitment}`
                : "The shoe commitment is of another shoe than the record's");
      } catch (err) {
        add("commitment-signature", "Shoe commitment signed by the operator", false, err.message);
      }
    }

    // the reveal, the seed against the commitment, and the shoe recomputed card by card
    if (!evidence.reveal) {
      add("reveal", "Seed revealed", null, "The shoe is still in play: its seed is revealed " +
          "once the shoe is finished. Until then its commitment binds every card in it.");
    } else {
      let seed = null;
      try {
        const envelope = parse(evidence.reveal.envelope, "reveal");
        const got = await V.verifyEnvelope(envelope, keys, "fairshoe.shoe-reveal/v1");
        reveal = envelope.payload;
        const same = reveal.shoe_id === shoe.id && reveal.decks === shoe.decks
          && reveal.client_seed === shoe.client_seed;
        add("reveal-signature", "Seed reveal signed by the operator", got.ok && same,
            !got.ok ? `The reveal's signature fails: ${got.error}`
              : same ? `signed by ${got.keyId}` : "The reveal is of another shoe than the record's");
        seed = V.unhex(reveal.seed, "the seed");
      } catch (err) {
        add("reveal-signature", "Seed reveal signed by the operator", false, err.message);
      }
      if (seed) {
        const computed = await V.seedCommitment(seed);
        const ok = computed === shoe.commitment && (!reveal || reveal.commitment === computed)
          && (!commitment || commitment.commitment === computed);
        add("seed-commitment", "Seed matches the commitment", ok, ok
          ? `SHA-256 of the seed is the commitment ${computed}`
          : `The seed does not match the commitment: its SHA-256 is ${computed}, the record commits to ${shoe.commitment}`);
        try {
          const dealt = await V.shoeCards(seed, V.unhex(shoe.client_seed || "", "client seed"), shoe.decks);
          const recorded = Array.isArray(record.cards) ? record.cards : [];
          const start = shoe.start;
          if (!Number.isInteger(start) || shoe.end - start !== recorded.length) {
            throw new Error(`the record deals ${recorded.length} cards from shoe positions ${start} to ${shoe.end}`);
          }
          cards = recorded.map((code, i) => ({ position: start + i, recorded: code,
                                               computed: dealt[start + i], ok: code === dealt[start + i] }));
          const bad = cards.filter((c) => !c.ok);
          add("cards", "Every card dealt from the committed shoe", bad.length === 0, bad.length === 0
            ? `${cards.length} cards, shoe positions ${start} to ${shoe.end - 1} of ${dealt.length}`
            : bad.map((c) => `Card ${c.position - start + 1} (shoe position ${c.position}): the record says ${c.recorded}, the shoe has ${c.computed}`).join("; "));
        } catch (err) {
          add("cards", "Every card dealt from the committed shoe", false, err.message);
        }
      }
    }
    if (!cards.length && record && Array.isArray(record.cards) && !evidence.reveal) {
      cards = record.cards.map((code, i) => ({ position: (shoe.start || 0) + i, recorded: code,
                                               computed: null, ok: null }));
    }

    // the log: the checkpoint, and each leaf's inclusion in it
    let cp = null;
    if (!evidence.checkpoint) {
      add("checkpoint", "Log checkpoint", null, "No checkpoint: the log was not checked.");
    } else {
      try {
        cp = await V.verifyCheckpoint(evidence.checkpoint, keys);
        if (evidence.origin && cp.origin !== evidence.origin) {
          throw new Error(`it is of log ${cp.origin}, not ${evidence.origin}`);
        }
        if (options.log && !cp.origin.endsWith("/" + options.log)) {
          throw new Error(`it is of log ${cp.origin}, not of ${options.log}`);
        }
        add("checkpoint", "Log checkpoint signed by the operator", true,
            `log ${cp.origin}, ${cp.size} entries, signed by ${cp.signedBy}`);
      } catch (err) {
        cp = null;
        add("checkpoint", "Log checkpoint signed by the operator", false, `The checkpoint fails: ${err.message}`);
      }
    }
    const logged = async (id, title, entry, what) => {
      if (!entry) return;
      if (!cp || entry.leaf_index === null || entry.leaf_index === undefined) {
        add(id, title, cp ? false : null, cp ? `The ${what} is not in the log` : "not checked (no checkpoint)");
        return;
      }
      try {
        const bytes = V.utf8(V.canonical(parse(entry.envelope, what)));
        await V.verifyInclusion(await V.leafHash(bytes), entry.leaf_index, cp.size, entry.proof, cp.root);
        add(id, title, true, `entry ${entry.leaf_index} of ${cp.size}`);
      } catch (err) {
        add(id, title, false, `The ${what}'s inclusion proof fails: ${err.message}`);
      }
    };
    await logged("record-logged", "Round record in the public log", evidence.record, "record");
    await logged("commitment-logged", "Shoe commitment in the public log", evidence.commitment, "shoe commitment");
    await logged("reveal-logged", "Seed reveal in the public log", evidence.reveal, "reveal");
    if (cp && evidence.commitment && evidence.record && Number.isInteger(evidence.record.leaf_index)) {
      const before = evidence.commitment.leaf_index < evidence.record.leaf_index;
      add("commitment-order", "Shoe committed before the round", before, before
        ? `commitment at entry ${evidence.commitment.leaf_index}, round at entry ${evidence.record.leaf_index}`
        : "The shoe's commitment was logged after the round");
    }

    // witnesses: each cosignature of a witness whose key is known
    if (cp) {
      const found = await V.verifyCosignatures(cp, witnessKeys);
      for (const c of found) {
        add(`cosignature-${c.name}`, `Cosigned by witness ${c.name}`, c.ok, c.ok === null
          ? "its key is not known here: not checked"
          : c.ok ? `at ${new Date(c.timestamp * 1000).toISOString()}, under ${c.source === "player"
            ? "the key you gave" : "its key as the operator names it (compare it with the witness's own)"}`
            : `The cosignature of ${c.name} ${c.error}`);
      }
      if (!found.length) add("cosignatures", "Witness cosignatures", null, "none on this checkpoint");
    }
    const failed = checks.some((c) => c.ok === false);
    return { verdict: failed ? "fail" : evidence.reveal ? "pass" : "open", logged: Boolean(cp),
             checks, cards, record };
  }

  V.checkRound = checkRound;
})(globalThis);

// The verifier page: what the player enters or drops, what is fetched from the log root this
// page is served from, and the report. Every check is FairshoeVerify.checkRound's
// (verify-core.js); text from the server or a file is written as text, never as markup.
"use strict";
(function () {
  const V = globalThis.FairshoeVerify;
  const $ = (id) => document.getElementById(id);
  const ROOT = new URL(".", location.href);  // the log root: <root><log>/round/<id>, .../keys
  const LOG_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
  const ROUND_ID = /^[0-9a-f]{32}$/;
  let runs = 0;  // each report is numbered (data-run), so a reader can tell a new one

  async function getJson(path, what) {
    const url = new URL(path, ROOT);
    const answer = await fetch(url, { cache: "no-store", credentials: "omit" });
    const text = await answer.text();
    if (!answer.ok) throw new Error(`${what}: ${answer.status} ${text.trim().slice(0, 200)}`);
    try { return JSON.parse(text); } catch (err) { throw new Error(`${what} is not JSON`); }
  }

  // The trusted keys: those the player pasted, else those this server publishes for the log.
  async function trustedKeys(log) {
    const pasted = $("keys").value.trim();
    if (pasted) {
      let doc;
      try { doc = JSON.parse(pasted); } catch (err) { throw new Error("the keys you pasted are not JSON"); }
      return { keys: await V.loadJwks(doc), source: "the keys you pasted" };
    }
    if (!LOG_ID.test(log)) throw new Error("name the casino's log to fetch its keys, or paste them");
    const doc = await getJson(`${log}/keys`, "the operator's keys");
    return { keys: await V.loadJwks(doc), source: `the keys published at ${new URL(`${log}/keys`, ROOT)}` };
  }

  async function witnessKeys(evidence) {
    const lines = $("witnesses").value.split("\n").map((l) => l.trim()).filter(Boolean);
    const named = Array.isArray(evidence.witnesses) ? evidence.witnesses : [];
    const found = [];
    for (const [vkey, source] of [...lines.map((l) => [l, "player"]), ...named.map((n) => [n, "operator"])]) {
      try {
        found.push(Object.assign(await V.parseWitnessKey(vkey), { source }));
      } catch (err) { /* a key that does not parse leaves its witness's line unchecked */ }
    }
    return found;
  }

  function show(report, keySource) {
    const result = $("result");
    result.hidden = false;
    result.dataset.verdict = report.verdict;
    result.dataset.run = String(++runs);
    const failed = report.checks.filter((c) => c.ok === false).map((c) => c.title);
    $("verdict").textContent = report.verdict === "pass"
      ? report.logged
        ? "Verified: this round was dealt from the committed shoe, and it is in the public log."
        : "Verified: this round was dealt from the committed shoe (the log was not checked)."
      : report.verdict === "open"
        ? "So far so good: signed, logged, and its shoe committed. The shoe is still in play: " +
          "come back when it is finished to check every card."
        : `Not verified: ${failed.join("; ")}`;
    $("keys-source").textContent = `Signatures checked against ${keySource}.`;
    const r = report.record;
    $("round-facts").textContent = r && typeof r === "object"
      ? `Round ${r.round_id}: ${r.game}, started ${r.started_at}, staked ${r.total_staked}, ` +
        `returned ${r.total_returned} (in minor units, such as cents).`
      : "";
    const list = $("checks");
    list.replaceChildren();
    for (const check of report.checks) {
      const item = document.createElement("li");
      item.dataset.check = check.id;
      item.dataset.ok = String(check.ok);
      const title = document.createElement("strong");
      title.textContent = check.title;
      const detail = document.createElement("span");
      detail.className = "detail";
      detail.textContent = check.detail;
      item.append(title, detail);
      list.append(item);
    }
    const body = $("cards").tBodies[0];
    body.replaceChildren();
    report.cards.forEach((card, i) => {
      const row = body.insertRow();
      row.dataset.ok = String(card.ok);
      for (const text of [String(i + 1), String(card.position), card.recorded,
                          card.computed === null ? "(after the reveal)" : card.computed,
                          card.ok === null ? "…" : card.ok ? "✔" : "✘ differs"]) {
        row.insertCell().textContent = text;
      }
    });
  }

  function showError(message) {
    show({ verdict: "fail", checks: [{ id: "input", title: "Could not check", ok: false, detail: message }],
           cards: [] }, "no keys");
  }

  async function run(evidence, log, roundId) {
    const { keys, source } = await trustedKeys(log);
    show(await V.checkRound(evidence, keys, await witnessKeys(evidence), { log, roundId }), source);
  }

  async function lookUp(event) {
    if (event) event.preventDefault();
    const log = $("log").value.trim(), round = $("round").value.trim().toLowerCase();
    try {
      if (!LOG_ID.test(log)) throw new Error("name the casino's log (letters, digits, . _ -)");
      if (!ROUND_ID.test(round)) throw new Error("a round id is 32 letters a-f and digits");
      await run(await getJson(`${log}/round/${round}`, "this round"), log, round);
    } catch (err) {
      showError(err.message);
    }
  }

  // Dropped files: each sorted by what it holds. A record without an evidence file has its
  // evidence (the proofs) fetched by its round id; the dropped record and reveal are what is
  // checked, the server's copies are not used for them.
  async function dropped(files) {
    const log = $("log").value.trim();
    try {
      let record = null, reveal = null, evidence = null;
      for (const file of files) {
        const text = await file.text();
        let doc;
        try { doc = JSON.parse(text); } catch (err) { throw new Error(`${file.name} is not JSON`); }
        const schema = doc && (doc.schema || (doc.payload && doc.payload.schema));
        if (schema === "fairshoe.round-evidence/v1") evidence = doc;
        else if (schema === "fairshoe.round/v1") record = text;
        else if (schema === "fairshoe.shoe-reveal/v1") reveal = text;
        else throw new Error(`${file.name} is not a round record, a reveal or a round's evidence`);
      }
      if (!evidence && !record) throw new Error("drop the round record (or its evidence file)");
      if (!evidence) {
        const rid = JSON.parse(record).payload.round_id;
        try {
          if (!LOG_ID.test(log) || !ROUND_ID.test(rid)) throw new Error("no log named");
          evidence = await getJson(`${log}/round/${rid}`, "this round's proofs");
        } catch (err) {
          evidence = { record: { envelope: record }, commitment: null, reveal: null, checkpoint: null };
        }
      }
      if (record) evidence.record = Object.assign({}, evidence.record, { envelope: record });
      if (reveal) evidence.reveal = Object.assign({}, evidence.reveal || { leaf_index: null }, { envelope: reveal });
      await run(evidence, log);
    } catch (err) {
      showError(err.message);
    }
  }

  function start() {
    if (!V || !V.hasWebCrypto) { $("no-crypto").hidden = false; return; }
    const params = new URLSearchParams(location.search);
    $("log").value = params.get("log") || "";
    $("round").value = params.get("round") || "";
    $("lookup").addEventListener("submit", lookUp);
    $("files").addEventListener("change", (e) => dropped([...e.target.files]));
    const zone = $("drop");
    zone.addEventListener("dragover", (e) => { e.preventDefault(); zone.classList.add("over"); });
    zone.addEventListener("dragleave", () => zone.classList.remove("over"));
    zone.addEventListener("drop", (e) => {
      e.preventDefault();
      zone.classList.remove("over");
      dropped([...e.dataTransfer.files]);
    });
    document.body.dataset.ready = "true";
    if ($("log").value && $("round").value) lookUp();
  }

  start();
})();

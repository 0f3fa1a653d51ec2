"""The player's verifier page (rng_service/api/verifier/) in a real headless Chromium (Debian's
chromium and chromium-driver, scripts/setup-tests), on rounds a real `fairshoe serve` dealt: a
round of a finished cut-card shoe dealt mid-shoe, a round whose shoe is still in play, and
tampered files (a flipped card, a changed signature, a wrong seed, a wrong proof, a forged
cosignature), each failing with the check that failed named. The page's JavaScript shoe is held
to the Python one on the CAVP HMAC_DRBG vectors and on 1,000 seeds, in one batch call. What is
served over HTTP is checked too: one round to whoever holds its id, of published operators
only, never another operator's round and never an unrevealed seed. One browser session and one
server for the module."""

from __future__ import annotations

import json
import random
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait
from support.live_server import Client, ServerProcess, Tls, make_dev_certs
from support.witness_server import TestWitness, serving

from game_math.cards import CODE_OF
from rng_service.crypto.keys import SigningKey, export_jwk, jwk_to_public_key
from rng_service.crypto.signing import encode_envelope
from rng_service.log import checkpoint_verifier
from rng_service.rng.drbg import HmacDrbg
from rng_service.rng.shoe import shoe_cards
from rng_service.service.translog import log_origin

PLAYER = "page-ann"
VECTORS = Path(__file__).resolve().parents[1] / "rng" / "data" / "hmac_drbg_sha256.json"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def witness() -> Iterator[tuple[TestWitness, str]]:
    found = TestWitness("witness.test/page")
    with serving(found) as url:
        yield found, url


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, witness: tuple[TestWitness, str]
           ) -> Iterator[ServerProcess]:
    """mTLS with op-a (its rounds published by id), op-b (its log only) and op-c (nothing);
    one witness cosigning every log's checkpoints."""
    certs = make_dev_certs(tmp_path_factory.mktemp("certs"))
    found, url = witness
    proc = ServerProcess(tmp_path_factory.mktemp("page"), stacked=False,
                         tls=Tls(certs, mutual=True), operators=["op-a", "op-b", "op-c"],
                         env={"FAIRSHOE_WITNESSES": f"{url} {found.cosigner.vkey()}"},
                         args=["--tiles-port", "any", "--tiles-rounds", "op-a",
                               "--tiles-logs", "op-b"])
    proc.start()
    yield proc
    assert proc.stop() == 0, proc.log()


def _url(server: ServerProcess, path: str) -> str:
    return f"http://127.0.0.1:{server.tiles_port}{path}"


def _get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as page:
            return page.status, dict(page.headers.items()), page.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers.items()), err.read()


def _evidence(server: ServerProcess, operator: str, round_id: str) -> dict[str, Any]:
    status, _, body = _get(_url(server, f"/log/{operator}/round/{round_id}"))
    assert status == 200, body
    found: dict[str, Any] = json.loads(body)
    return found


def _shoe_of(evidence: dict[str, Any]) -> dict[str, Any]:
    shoe: dict[str, Any] = json.loads(evidence["record"]["envelope"])["payload"]["shoe"]
    return shoe


@pytest.fixture(scope="module")
def rounds(server: ServerProcess, witness: tuple[TestWitness, str]) -> dict[str, Any]:
    """op-a: double-exposure rounds (a 6-deck cut-card shoe) until the first shoe is finished,
    so its rounds are revealed and the last round's shoe is in play; op-b: one round."""
    found, _ = witness
    a, b = server.open_channel("operator-a"), server.open_channel("operator-b")
    keys = json.loads(_get(_url(server, "/log/op-a/keys"))[2])["keys"]
    for operator in ("op-a", "op-b"):  # the witness trusts the logs' key, got as a reader would
        found.logs[log_origin(operator)] = [
            checkpoint_verifier(jwk_to_public_key(key), log_origin(operator)) for key in keys]
    client = Client(a)
    client.deposit(PLAYER, 10_000_000)
    played: list[tuple[str, str]] = []  # (round id, shoe id)
    while len({shoe for _, shoe in played}) < 2:
        rid = client.play_out(PLAYER, client.start(PLAYER, "double-exposure", [1000])).round_id
        played.append((rid, _shoe_of(_evidence(server, "op-a", rid))["id"]))
        assert len(played) < 60, "the cut card never came out"
    first_shoe = played[0][1]
    finished = [rid for rid, shoe in played if shoe == first_shoe]
    other = Client(b)
    other.deposit(PLAYER, 100_000)
    b_round = other.play_out(PLAYER, other.start(PLAYER, "snap", [1000])).round_id
    a.close()
    b.close()
    return {"mid_shoe": finished[len(finished) // 2], "in_play": played[-1][0],
            "op_b": b_round}


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-extensions", "--no-first-run"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_script_timeout(120)
    yield driver
    driver.quit()


def _open(browser: WebDriver, server: ServerProcess, query: str = "") -> None:
    browser.get(_url(server, f"/log/verify{query}"))
    WebDriverWait(browser, 30).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true")


def _run_count(browser: WebDriver) -> int:
    return int(browser.find_element(By.ID, "result").get_attribute("data-run") or 0)


def _report(browser: WebDriver, after: int) -> dict[str, Any]:
    """The report the page shows once its run ``after + 1`` is done."""
    WebDriverWait(browser, 60).until(lambda d: _run_count(d) > after)
    result = browser.find_element(By.ID, "result")
    checks = {item.get_attribute("data-check"): (item.get_attribute("data-ok"), item.text)
              for item in result.find_elements(By.CSS_SELECTOR, "#checks li")}
    cards = [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")] + [
        row.get_attribute("data-ok")] for row in result.find_elements(By.CSS_SELECTOR,
                                                                        "#cards tbody tr")]
    return {"verdict": result.get_attribute("data-verdict"), "checks": checks, "cards": cards,
            "headline": browser.find_element(By.ID, "verdict").text}


def _failed(report: dict[str, Any]) -> dict[str, str]:
    return {name: text for name, (ok, text) in report["checks"].items() if ok == "false"}


def test_the_page_verifies_a_round_dealt_mid_shoe(browser: WebDriver, server: ServerProcess,
                                                 rounds: dict[str, Any]) -> None:
    rid = rounds["mid_shoe"]
    evidence = _evidence(server, "op-a", rid)
    record = json.loads(evidence["record"]["envelope"])["payload"]
    assert record["shoe"]["start"] > 0  # a later round of a shoe dealt across rounds
    _open(browser, server)
    text = browser.find_element(By.ID, "difference").text
    assert "one seed per bet" in text and "real shoe" in text and "public log" in text
    before = _run_count(browser)
    browser.find_element(By.ID, "log").send_keys("op-a")
    browser.find_element(By.ID, "round").send_keys(rid)
    browser.find_element(By.ID, "verify").click()
    report = _report(browser, before)
    assert report["verdict"] == "pass", report
    assert report["headline"] == ("Verified: this round was dealt from the committed shoe, "
                                  "and it is in the public log.")
    assert not _failed(report)
    facts = browser.find_element(By.ID, "round-facts").text
    assert f"Round {rid}: double-exposure" in facts and "staked 1000" in facts
    for name in ("record-signature", "commitment-signature", "reveal-signature", "seed-commitment",
                 "cards", "checkpoint", "record-logged", "commitment-logged", "reveal-logged",
                 "commitment-order", "cosignature-witness.test/page"):
        assert report["checks"][name][0] == "true", (name, report["checks"])
    # every dealt card shown, each matching the recomputed shoe at its position
    assert [row[2] for row in report["cards"]] == record["cards"]
    assert [row[1] for row in report["cards"]] == [
        str(p) for p in range(record["shoe"]["start"], record["shoe"]["end"])]
    assert all(row[3] == row[2] and row[-1] == "true" for row in report["cards"])


def test_a_round_whose_shoe_is_in_play_has_no_seed(browser: WebDriver, server: ServerProcess,
                                                   rounds: dict[str, Any]) -> None:
    rid = rounds["in_play"]
    status, _, body = _get(_url(server, f"/log/op-a/round/{rid}"))
    evidence = json.loads(body)
    assert status == 200 and evidence["reveal"] is None and evidence["commitment"] is not None
    for entry in (evidence["record"], evidence["commitment"]):
        assert "seed" not in json.loads(entry["envelope"])["payload"]
    assert b'\\"seed\\"' not in body and b"shoe-reveal" not in body
    revealed = _get(_url(server, f"/log/op-a/round/{rounds['mid_shoe']}"))[2]
    assert b'\\"seed\\"' in revealed  # what the line above would see, were a seed served
    _open(browser, server, f"?log=op-a&round={rid}")  # a link a casino gives its player
    report = _report(browser, 0)
    assert report["verdict"] == "open", report
    assert not _failed(report)
    ok, text = report["checks"]["reveal"]
    assert ok == "null" and "still in play" in text
    assert report["checks"]["record-logged"][0] == "true"
    assert report["checks"]["commitment-order"][0] == "true"


def _files(tmp: Path, evidence: dict[str, Any], *, record: dict[str, Any] | None = None,
           reveal: dict[str, Any] | None = None, with_evidence: bool = False) -> list[Path]:
    """The round's files as a player saves them: record, reveal (and the evidence file)."""
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    record = record or json.loads(evidence["record"]["envelope"])
    reveal = reveal or json.loads(evidence["reveal"]["envelope"])
    paths = [tmp / "record.json", tmp / "reveal.json"]
    paths[0].write_bytes(encode_envelope(record))
    paths[1].write_text(json.dumps(reveal, indent=2))  # any layout: the page re-canonicalises
    if with_evidence:
        paths.append(tmp / "evidence.json")
        paths[2].write_text(json.dumps(evidence))
    return paths


def _drop(browser: WebDriver, paths: list[Path]) -> dict[str, Any]:
    before = _run_count(browser)
    field = browser.find_element(By.ID, "files")
    browser.execute_script("arguments[0].value = '';", field)
    field.send_keys("\n".join(str(p) for p in paths))
    return _report(browser, before)


def _flip_card(code: str) -> str:
    return CODE_OF[(CODE_OF.index(code) + 1) % 52]


def test_dropped_files_verify_and_each_tampering_is_named(
        browser: WebDriver, server: ServerProcess, rounds: dict[str, Any],
        tmp_path: Path) -> None:
    evidence = _evidence(server, "op-a", rounds["mid_shoe"])
    record = json.loads(evidence["record"]["envelope"])
    reveal = json.loads(evidence["reveal"]["envelope"])
    _open(browser, server, "?log=op-a")
    report = _drop(browser, _files(tmp_path / "plain", evidence))
    assert report["verdict"] == "pass" and not _failed(report), report

    flipped = json.loads(json.dumps(record))
    flipped["payload"]["cards"][1] = _flip_card(record["payload"]["cards"][1])
    failed = _failed(_drop(browser, _files(tmp_path / "card", evidence, record=flipped)))
    assert set(failed) == {"record-signature", "cards", "record-logged"}, failed
    assert "signature" in failed["record-signature"]
    assert (f"Card 2 (shoe position {record['payload']['shoe']['start'] + 1}): the record says "
            f"{flipped['payload']['cards'][1]}, the shoe has {record['payload']['cards'][1]}"
            in failed["cards"])

    resigned = json.loads(json.dumps(record))
    value = resigned["signature"]["value"]
    resigned["signature"]["value"] = ("A" if value[0] != "A" else "B") + value[1:]
    failed = _failed(_drop(browser, _files(tmp_path / "sig", evidence, record=resigned)))
    assert set(failed) == {"record-signature", "record-logged"}, failed
    assert "does not verify" in failed["record-signature"]

    reseeded = json.loads(json.dumps(reveal))
    seed = reseeded["payload"]["seed"]
    reseeded["payload"]["seed"] = ("0" if seed[0] != "0" else "1") + seed[1:]
    failed = _failed(_drop(browser, _files(tmp_path / "seed", evidence, reveal=reseeded)))
    assert {"reveal-signature", "seed-commitment", "cards", "reveal-logged"} <= set(failed)
    assert "The seed does not match the commitment" in failed["seed-commitment"]

    misproved = json.loads(json.dumps(evidence))
    proof = misproved["record"]["proof"]
    proof[0] = ("0" if proof[0][0] != "0" else "1") + proof[0][1:]
    failed = _failed(_drop(browser, _files(tmp_path / "proof", misproved, with_evidence=True)))
    assert set(failed) == {"record-logged"}, failed
    assert "inclusion proof fails" in failed["record-logged"]

    forged = json.loads(json.dumps(evidence))
    lines = forged["checkpoint"].split("\n")
    (at,) = [i for i, line in enumerate(lines) if line.startswith("— witness.test/page ")]
    blob = lines[at].rsplit(" ", 1)[1]
    lines[at] = lines[at][: -len(blob)] + blob[:20] + ("A" if blob[20] != "A" else "B") + blob[21:]
    forged["checkpoint"] = "\n".join(lines)
    failed = _failed(_drop(browser, _files(tmp_path / "cosig", forged, with_evidence=True)))
    assert set(failed) == {"cosignature-witness.test/page"}, failed
    assert "does not verify" in failed["cosignature-witness.test/page"]

    # a server answering another round than the one asked for: the record is signed and logged,
    # but not the player's
    keys = json.loads(_get(_url(server, "/log/op-a/keys"))[2])
    asked = rounds["in_play"]
    checks = browser.execute_async_script(JS_CHECK, evidence, keys, asked)
    failed = {c["id"]: c["detail"] for c in checks if c["ok"] is False}
    assert set(failed) == {"record-signature"}, checks
    assert f"not of the round asked for, {asked}" in failed["record-signature"]


def test_keys_pasted_by_the_player_are_the_only_ones_trusted(
        browser: WebDriver, server: ServerProcess, rounds: dict[str, Any]) -> None:
    stranger = SigningKey.generate()
    _open(browser, server, "?log=op-a")
    browser.find_element(By.TAG_NAME, "summary").click()
    browser.find_element(By.ID, "keys").send_keys(
        export_jwk({stranger.key_id: stranger.public_key}))
    before = _run_count(browser)
    browser.find_element(By.ID, "round").send_keys(rounds["mid_shoe"])
    browser.find_element(By.ID, "verify").click()
    report = _report(browser, before)
    failed = _failed(report)
    assert report["verdict"] == "fail"
    assert {"record-signature", "reveal-signature", "checkpoint"} <= set(failed)
    assert "not among the 1 trusted key(s)" in failed["record-signature"]


def test_what_is_served_keeps_tenants_apart(server: ServerProcess,
                                            rounds: dict[str, Any]) -> None:
    a_round, b_round = rounds["mid_shoe"], rounds["op_b"]
    assert _get(_url(server, f"/log/op-a/round/{b_round}"))[0] == 404  # op-b's, asked as op-a
    status, _, body = _get(_url(server, f"/log/op-b/round/{b_round}"))
    assert status == 403 and b"not published by id" in body  # op-b's log only
    assert _get(_url(server, f"/log/op-c/round/{b_round}"))[0] == 404  # not published at all
    assert _get(_url(server, "/log/op-c/keys"))[0] == 404
    assert _get(_url(server, f"/log/op-a/round/{'0' * 32}"))[0] == 404
    assert _get(_url(server, "/log/op-a/round/../../etc/passwd"))[0] == 404
    status, _, body = _get(_url(server, f"/log/op-a/round/{a_round}"))
    assert status == 200 and json.loads(body)["origin"] == log_origin("op-a")
    status, headers, body = _get(_url(server, "/log/verify"))
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert _get(_url(server, "/log/verify-core.js"))[0] == 200
    assert _get(_url(server, "/log/verify.py"))[0] == 404


def _drbg_vector_bits(vector: dict[str, str]) -> str:
    field = lambda name: bytes.fromhex(vector.get(name, ""))  # noqa: E731
    drbg = HmacDrbg(field("entropy_input"), field("nonce"), field("personalization_string"))
    if "entropy_input_reseed" in vector:
        drbg.reseed(field("entropy_input_reseed"), field("additional_input_reseed"))
    drbg.generate(128, field("additional_input_1"))
    return drbg.generate(128, field("additional_input_2")).hex()


JS_VECTORS = """
const [vectors, done] = arguments;
const V = FairshoeVerify, b = (v, k) => V.unhex(v[k] || "", k);
Promise.all(vectors.map(async (v) => {
  const d = await V.HmacDrbg.create(b(v, "entropy_input"), b(v, "nonce"),
                                    b(v, "personalization_string"));
  if (v.entropy_input_reseed) {
    await d.reseed(b(v, "entropy_input_reseed"), b(v, "additional_input_reseed"));
  }
  await d.generate(128, b(v, "additional_input_1"));
  return V.hex(await d.generate(128, b(v, "additional_input_2")));
})).then(done, (e) => done("error: " + e));
"""
JS_CHECK = """
const [evidence, jwks, roundId, done] = arguments;
FairshoeVerify.loadJwks(jwks)
  .then((keys) => FairshoeVerify.checkRound(evidence, keys, [], { log: "op-a", roundId }))
  .then((report) => done(report.checks), (e) => done("error: " + e));
"""
JS_SHOES = """
const [items, done] = arguments;
const V = FairshoeVerify;
Promise.all(items.map((i) => V.shoeCards(V.unhex(i[0], "seed"), V.unhex(i[1], "client"), i[2])
  .then((cards) => cards.join(" ")))).then(done, (e) => done("error: " + e));
"""


def test_the_js_shoe_is_the_python_shoe(browser: WebDriver, server: ServerProcess) -> None:
    _open(browser, server)
    vectors = json.loads(VECTORS.read_text())["vectors"]
    got = browser.execute_async_script(JS_VECTORS, vectors)
    assert got == [v["returned_bits"] for v in vectors]
    assert got == [_drbg_vector_bits(v) for v in vectors]
    rng = random.Random(18)
    items = [(rng.randbytes(48).hex(), rng.randbytes(rng.choice((0, 0, 1, 8, 32, 256))).hex(),
              rng.choice((1, 2, 6, 8, 16))) for _ in range(1000)]
    got = browser.execute_async_script(JS_SHOES, items)
    assert isinstance(got, list) and len(got) == 1000, got
    for (seed, client, decks), cards in zip(items, got, strict=True):
        expected = [CODE_OF[c] for c in shoe_cards(bytes.fromhex(seed), bytes.fromhex(client),
                                                     decks)]
        assert cards.split(" ") == expected, (seed, client, decks)

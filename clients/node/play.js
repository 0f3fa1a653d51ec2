#!/usr/bin/env node
// Plays one full round of each Fairshoe game over gRPC, from the published .proto files loaded
// at run time (no generated code): StartRound, Act until the round is over, GetRound, and
// GetBalance. Prints one JSON object per line; exits non-zero on any failure or inconsistency.
//
//   node clients/node/play.js --address 127.0.0.1:50051 [--player ID] [--mode DEMO|REAL]
//        [--bet MINOR] [--currency EUR] [--games snap,double-deck,...] [--tls-ca FILE]
//        [--tls-cert FILE --tls-key FILE]
//
// --tls-ca speaks TLS trusting that CA; --tls-cert/--tls-key present a client certificate, for a
// server under mutual TLS, where the certificate names the operator the rounds belong to.
//
// A failure is the last line, {"event": "error", "method", "code", "reason", "metadata", "field",
// "message"}: the status's reason code, ErrorInfo metadata and BadRequest field decoded from its
// details (status_details.js), and exit status 1.
//
// Decisions are simple and legal by construction: decline insurance and even money, hit below
// 12 when hitting is legal, otherwise stand.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const { statusDetails } = require('./status_details');

const PROTO_ROOT = path.resolve(__dirname, '..', '..', 'proto');
const PROTO_FILES = [
  'fairshoe/round/v1/round.proto',
  'fairshoe/wallet/v1/wallet.proto',
  'fairshoe/game/v1/game.proto',
];
const ALL_GAMES = ['snap', 'double-deck', 'double-exposure', 'multi-hand'];
const MAX_ACTS = 50;

function parseArgs(argv) {
  const args = {
    address: '127.0.0.1:50051', player: 'node-client', mode: 'MODE_DEMO', bet: 1000,
    currency: 'EUR', games: ALL_GAMES, tlsCa: null, tlsCert: null, tlsKey: null, timeout: 10,
  };
  for (let i = 0; i < argv.length; i += 1) {
    const value = argv[i + 1];
    switch (argv[i]) {
      case '--address': args.address = value; i += 1; break;
      case '--player': args.player = value; i += 1; break;
      case '--mode': args.mode = `MODE_${String(value).toUpperCase()}`; i += 1; break;
      case '--bet': args.bet = Number(value); i += 1; break;
      case '--currency': args.currency = value; i += 1; break;
      case '--games': args.games = String(value).split(','); i += 1; break;
      case '--tls-ca': args.tlsCa = value; i += 1; break;
      case '--tls-cert': args.tlsCert = value; i += 1; break;
      case '--tls-key': args.tlsKey = value; i += 1; break;
      case '--timeout': args.timeout = Number(value); i += 1; break;
      default: throw new Error(`unknown argument ${argv[i]}`);
    }
  }
  return args;
}

function loadServices() {
  const definition = protoLoader.loadSync(PROTO_FILES, {
    includeDirs: [PROTO_ROOT],
    keepCase: true, // field names as the .proto spells them
    longs: Number, // int64 money: minor units stay far below 2^53
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const loaded = grpc.loadPackageDefinition(definition);
  return {
    Round: loaded.fairshoe.round.v1.RoundService,
    Wallet: loaded.fairshoe.wallet.v1.WalletService,
    Game: loaded.fairshoe.game.v1.GameService,
  };
}

function credentials(args) {
  if (Boolean(args.tlsCert) !== Boolean(args.tlsKey)) {
    throw new Error('--tls-cert and --tls-key go together');
  }
  if (!args.tlsCa && !args.tlsCert) return grpc.credentials.createInsecure();
  const read = (file) => (file ? fs.readFileSync(file) : null);
  return grpc.credentials.createSsl(read(args.tlsCa), read(args.tlsKey), read(args.tlsCert));
}

// A failed call as an Error whose message is "METHOD: CODE REASON: text", carrying the method,
// the status code's name and the status details (reason, metadata, field) for the error line.
function callError(method, err) {
  const code = Object.keys(grpc.status).find((k) => grpc.status[k] === err.code) || err.code;
  const details = statusDetails(err);
  const head = [code, details.reason].filter(Boolean).join(' ');
  const failure = new Error(`${method}: ${head}: ${err.details || err.message}`);
  failure.status = { method, code, ...details };
  return failure;
}

// The JSON line reporting a failure: the message, and for a call the status's structured parts.
function errorRecord(err) {
  const record = { event: 'error' };
  const status = err.status;
  if (status) {
    record.method = status.method;
    record.code = status.code;
    if (status.reason) record.reason = status.reason;
    if (Object.keys(status.metadata).length) record.metadata = status.metadata;
    if (status.field) record.field = status.field;
  }
  record.message = err.message;
  return record;
}

// One unary call as a promise, with a deadline; a failure is a callError.
function call(client, method, request, timeoutSeconds) {
  return new Promise((resolve, reject) => {
    const deadline = new Date(Date.now() + timeoutSeconds * 1000);
    client[method](request, { deadline }, (err, reply) => {
      if (err) {
        reject(callError(method, err));
      } else {
        resolve(reply);
      }
    });
  });
}

function requestId() {
  return `node-${crypto.randomUUID()}`;
}

function emit(record) {
  process.stdout.write(`${JSON.stringify(record)}\n`);
}

// The decision for the round's turn, from its legal actions.
function decide(view) {
  const legal = new Set(view.legal_actions.map((a) => a.action));
  if (view.turn.decision === 'DECISION_INSURANCE') return { insurance: { amount_minor: 0 } };
  if (view.turn.decision === 'DECISION_EVEN_MONEY') return { even_money: { accept: false } };
  const hand = view.hands.find((h) => h.hand_id === view.turn.hand_id);
  if (hand && hand.total < 12 && legal.has('ACTION_KIND_HIT')) return { hit: {} };
  return { stand: {} };
}

function kindOf(action) {
  return Object.keys(action)[0];
}

function check(condition, message) {
  if (!condition) throw new Error(message);
}

async function playRound(stubs, args, game) {
  const account = { player_id: args.player, currency: args.currency, mode: args.mode };
  let view = (await call(stubs.round, 'StartRound', {
    player_id: args.player, game, level: '', mode: args.mode, currency: args.currency,
    hands: [{ bet_minor: args.bet, side_bets: [] }], side_bets: [], request_id: requestId(),
  }, args.timeout)).round;
  const actions = [];
  while (view.status === 'ROUND_STATUS_AWAITING_PLAYER') {
    check(actions.length < MAX_ACTS, `${game}: round ${view.round_id} never finished`);
    const action = decide(view);
    actions.push(kindOf(action));
    view = (await call(stubs.round, 'Act', {
      player_id: args.player, round_id: view.round_id, hand_id: view.turn.hand_id, action,
      expected_version: view.version, request_id: requestId(),
    }, args.timeout)).round;
  }
  const again = (await call(stubs.round, 'GetRound', {
    player_id: args.player, round_id: view.round_id,
  }, args.timeout)).round;
  check(again.version === view.version && again.status === view.status,
    `${game}: GetRound answers version ${again.version} ${again.status}, Act ended at `
    + `${view.version} ${view.status}`);
  const balance = await call(stubs.wallet, 'GetBalance', { account }, args.timeout);
  check(balance.balance_minor === view.balance_after_minor,
    `${game}: GetBalance says ${balance.balance_minor}, the round ${view.balance_after_minor}`);
  check(view.status === 'ROUND_STATUS_FINISHED', `${game}: round ended ${view.status}`);
  return {
    event: 'round', game, round_id: view.round_id, status: view.status, actions,
    hands: view.hands.map((h) => ({
      cards: h.cards.map((c) => c.code), total: h.total, outcome: h.outcome,
    })),
    dealer: view.dealer.cards.map((c) => c.code),
    staked_minor: view.total_staked_minor, returned_minor: view.total_returned_minor,
    balance_after_minor: view.balance_after_minor, balance_minor: balance.balance_minor,
    shoe_commitment: view.shoe.commitment,
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const services = loadServices();
  const creds = credentials(args);
  const stubs = {
    round: new services.Round(args.address, creds),
    wallet: new services.Wallet(args.address, creds),
    game: new services.Game(args.address, creds),
  };
  try {
    const games = (await call(stubs.game, 'ListGames', {}, args.timeout)).games.map((g) => g.id);
    emit({ event: 'games', games });
    for (const game of args.games) {
      check(games.includes(game), `the server does not serve ${game}`);
      emit(await playRound(stubs, args, game));
    }
    emit({ event: 'done', rounds: args.games.length });
  } finally {
    Object.values(stubs).forEach((stub) => stub.close());
  }
}

main().catch((err) => {
  emit(errorRecord(err));
  process.exitCode = 1;
});

-- Fairshoe schema v5: a shoe serves one kind of money, DEMO or REAL, never both.
-- Before, a player's current shoe of a game was shared by demo and real rounds: in a cut-card
-- game (double-exposure) free demo rounds showed cards of the very shoe real money was then bet
-- on, so a player could count them and bet real money when the count favoured them.

-- Existing shoes: a shoe only demo rounds dealt from is DEMO; every other one is REAL, which is
-- what it has served real money as (a shoe with a real round in it is part of the real-money
-- game's records), or, with no round yet, nothing it has shown can matter. The default only
-- fills existing rows (SQLite needs one to add a NOT NULL column): every insert names the mode.
ALTER TABLE shoes ADD COLUMN mode TEXT NOT NULL DEFAULT 'REAL' CHECK (mode IN ('DEMO', 'REAL'));

UPDATE shoes SET mode = 'DEMO'
WHERE EXISTS (SELECT 1 FROM rounds r
              WHERE r.operator = shoes.operator AND r.shoe_id = shoes.shoe_id)
  AND NOT EXISTS (SELECT 1 FROM rounds r
                  WHERE r.operator = shoes.operator AND r.shoe_id = shoes.shoe_id
                    AND r.mode = 'REAL');

-- A current shoe both kinds of money have dealt from is retired, unless a round still deals
-- from it: status 'finished' makes start-up recovery sign and log its reveal (so its rounds stay
-- verifiable) and the player's next round gets a fresh shoe of its mode.
UPDATE shoes SET status = 'finished', version = version + 1,
                 updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
WHERE status IN ('committed', 'in_play')
  AND EXISTS (SELECT 1 FROM rounds r
              WHERE r.operator = shoes.operator AND r.shoe_id = shoes.shoe_id
                AND r.mode = 'DEMO')
  AND EXISTS (SELECT 1 FROM rounds r
              WHERE r.operator = shoes.operator AND r.shoe_id = shoes.shoe_id
                AND r.mode = 'REAL')
  AND NOT EXISTS (SELECT 1 FROM rounds r
                  WHERE r.operator = shoes.operator AND r.shoe_id = shoes.shoe_id
                    AND r.status = 'open');

-- A player deals from one current shoe per game and mode.
DROP INDEX shoes_one_current;
CREATE UNIQUE INDEX shoes_one_current ON shoes (operator, player, game, mode)
    WHERE status IN ('committed', 'in_play');

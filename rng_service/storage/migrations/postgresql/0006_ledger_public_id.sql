-- Fairshoe schema v6: a ledger entry's public id, what clients see of it.
-- Before, a transaction id (and a ListTransactions page token) was entry_id, one sequence that
-- every operator's postings share: a tenant could measure every other tenant's volume by the gap
-- between two of its own ids. entry_id stays the internal order; clients see a random 128-bit
-- hex id, unique per operator (gen_random_uuid's random bits, for rows from before this
-- migration; the service makes the new ones).
ALTER TABLE ledger_entries ADD COLUMN public_id TEXT COLLATE "C";
UPDATE ledger_entries SET public_id = replace(gen_random_uuid()::text, '-', '');
ALTER TABLE ledger_entries ALTER COLUMN public_id SET NOT NULL;
CREATE UNIQUE INDEX ledger_by_public_id ON ledger_entries (operator, public_id);

-- A retried deposit or withdrawal answers its stored first answer: name the entry there by its
-- public id too (and drop the counter from it).
UPDATE idempotency i
SET response = convert_to(((convert_from(i.response, 'UTF8')::jsonb - 'entry_id')
                           || jsonb_build_object('transaction_id', e.public_id))::text, 'UTF8')
FROM ledger_entries e
WHERE i.operation IN ('deposit', 'withdrawal')
  AND e.operator = i.operator
  AND e.entry_id = (convert_from(i.response, 'UTF8')::jsonb ->> 'entry_id')::bigint;

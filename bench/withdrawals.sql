-- The withdrawal request's transaction, straight on PostgreSQL: the ceiling
-- POST /api/withdrawals is measured against. Same locks, same rows.
-- Run with -M extended (variables are bind parameters). :n picks the account (set by the caller: fixed for "hot", random for "spread").
SELECT account_id AS aid FROM bench_accounts WHERE n = :n \gset
-- The API makes the id in Python: outside the lock here too.
SELECT gen_random_uuid() AS wid \gset
BEGIN;
SELECT available, withdrawn_day, withdrawn_on_day FROM accounts_accountbalance WHERE account_id = :aid::uuid FOR UPDATE;
-- The daily limit is checked against the row's total for the day (withdrawals/limits.py): no statement.
-- The withdrawal, the balance (with the day's withdrawn total) and its ledger entry in one statement, as
-- withdrawal_request sends them (ledger_post with the withdrawal along).
WITH record AS (INSERT INTO withdrawals_withdrawal (id, account_id, amount, fee, discount_fee, total_debit,
    liquid_amount, pix_key_type, pix_key, status, version, idempotency_id, provider_payout_id, failure_reason,
    hold_reason, payout_lease_token, created_at, updated_at)
  VALUES (:wid::uuid, :aid::uuid, 1000, 0, true, 1000, 1000, 'cpf', '52998224725', 'pending', 0,
    replace(:wid, '-', ''), '', '', '', '', now(), now()) RETURNING id),
moved AS (UPDATE accounts_accountbalance SET available = available - 1000, updated_at = now(),
    withdrawn_on_day = CASE WHEN withdrawn_day = (now() AT TIME ZONE 'America/Sao_Paulo')::date
      THEN withdrawn_on_day + 1000 ELSE 1000 END,
    withdrawn_day = (now() AT TIME ZONE 'America/Sao_Paulo')::date
  WHERE account_id = :aid::uuid RETURNING available)
INSERT INTO accounts_ledgerentry (account_id, kind, amount, balance_after, reference, created_at)
  SELECT :aid::uuid, 'withdrawal', -1000, available, 'withdrawal:' || :wid, now() FROM moved;
COMMIT;

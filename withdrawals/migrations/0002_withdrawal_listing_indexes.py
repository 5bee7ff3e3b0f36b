# Listing indexes that cover the filters, as for charges (issue #6).

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # CONCURRENTLY: a table of millions of withdrawals keeps taking writes while
    # the indexes build (a plain CREATE INDEX blocks inserts for minutes), and
    # it cannot run inside a transaction. The new indexes come first, so the
    # listings are never without one during the deploy.
    atomic = False

    dependencies = [
        ('withdrawals', '0001_initial'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='withdrawal',
            index=models.Index(fields=['account', '-created_at', '-id'], include=('status', 'amount', 'paid_at'), name='withdrawal_list_recent'),
        ),
        AddIndexConcurrently(
            model_name='withdrawal',
            index=models.Index(fields=['account', 'status', '-created_at', '-id'], include=('amount', 'paid_at'), name='withdrawal_list_status'),
        ),
        AddIndexConcurrently(
            model_name='withdrawal',
            index=models.Index(condition=models.Q(('paid_at__isnull', False)), fields=['account', 'paid_at'], include=('status', 'amount', 'created_at', 'id'), name='withdrawal_list_paid_at'),
        ),
        AddIndexConcurrently(
            model_name='withdrawal',
            index=models.Index(fields=['account', 'amount'], include=('status', 'paid_at', 'created_at', 'id'), name='withdrawal_list_amount'),
        ),
        RemoveIndexConcurrently(model_name='withdrawal', name='withdrawal_account_recent'),
        RemoveIndexConcurrently(model_name='withdrawal', name='withdrawal_account_status'),
        RemoveIndexConcurrently(model_name='withdrawal', name='withdrawal_account_paid_at'),
        RemoveIndexConcurrently(model_name='withdrawal', name='withdrawal_account_amount'),
    ]

# Listing indexes that cover the filters (issue #6, bench/listing.py).

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # CONCURRENTLY: a table of millions of charges keeps taking writes while
    # the indexes build (a plain CREATE INDEX blocks inserts for minutes), and
    # it cannot run inside a transaction. The new indexes come first, so the
    # listings are never without one during the deploy.
    atomic = False

    dependencies = [
        ('payments', '0001_initial'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='charge',
            index=models.Index(fields=['account', '-created_at', '-id'], include=('status', 'amount', 'paid_at'), name='charge_list_recent'),
        ),
        AddIndexConcurrently(
            model_name='charge',
            index=models.Index(fields=['account', 'status', '-created_at', '-id'], include=('amount', 'paid_at'), name='charge_list_status'),
        ),
        AddIndexConcurrently(
            model_name='charge',
            index=models.Index(condition=models.Q(('paid_at__isnull', False)), fields=['account', 'paid_at'], include=('status', 'amount', 'created_at', 'id'), name='charge_list_paid_at'),
        ),
        AddIndexConcurrently(
            model_name='charge',
            index=models.Index(fields=['account', 'amount'], include=('status', 'paid_at', 'created_at', 'id'), name='charge_list_amount'),
        ),
        RemoveIndexConcurrently(model_name='charge', name='charge_account_recent'),
        RemoveIndexConcurrently(model_name='charge', name='charge_account_status'),
        RemoveIndexConcurrently(model_name='charge', name='charge_account_paid_at'),
        RemoveIndexConcurrently(model_name='charge', name='charge_account_amount'),
    ]

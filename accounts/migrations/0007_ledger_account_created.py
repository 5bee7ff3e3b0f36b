# The statement's period filter (GET /api/statement, issue 16).

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # CONCURRENTLY: the ledger keeps taking entries (every money movement)
    # while the index builds; it cannot run inside a transaction.
    atomic = False

    dependencies = [
        ('accounts', '0006_admin_ptbr_labels_and_contact_email'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='ledgerentry',
            index=models.Index(fields=['account', 'created_at', 'id'], name='ledger_account_created'),
        ),
    ]

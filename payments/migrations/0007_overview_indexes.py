# Indexes of the back office's overview (issue 15, observability.selectors).

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # CONCURRENTLY, as the listing indexes (payments 0002): the table keeps
    # taking writes while they build; outside a transaction.
    atomic = False

    dependencies = [
        ('accounts', '0005_undetermined_payout_failure_action'),
        ('acquirers', '0003_acquirer_reset_circuit_breaker'),
        ('payments', '0006_chargeattempt_busy'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='charge',
            index=models.Index(fields=['created_at'], include=('status', 'amount'), name='charge_overview_day'),
        ),
        AddIndexConcurrently(
            model_name='charge',
            index=models.Index(condition=models.Q(('status', 'chargeback')), fields=['created_at'], name='charge_chargeback_open'),
        ),
    ]

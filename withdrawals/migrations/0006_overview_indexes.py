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
        ('withdrawals', '0005_undetermined_payout_failure_permission'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='withdrawal',
            index=models.Index(fields=['created_at'], include=('status', 'amount'), name='withdrawal_overview_day'),
        ),
        AddIndexConcurrently(
            model_name='withdrawal',
            index=models.Index(condition=models.Q(('status', 'pending')), fields=['account', 'created_at'], name='withdrawal_pending'),
        ),
    ]

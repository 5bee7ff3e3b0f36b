# Indexes of the back office's overview (issue 15, observability.selectors).

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # CONCURRENTLY, as the listing indexes (payments 0002): the table keeps
    # taking writes while they build; outside a transaction.
    atomic = False

    dependencies = [
        ('webhooks', '0002_webhookendpoint_deleted_at_and_more'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='webhookdelivery',
            index=models.Index(condition=models.Q(('status', 'failed')), fields=['created_at'], name='delivery_failed'),
        ),
    ]

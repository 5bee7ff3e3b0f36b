# A skipped acquirer (open circuit breaker) is recorded as an attempt (issue #7).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('payments', '0002_charge_listing_indexes'),
    ]

    operations = [
        migrations.AlterField(
            model_name='chargeattempt',
            name='outcome',
            field=models.CharField(choices=[('ok', 'Aceita'), ('unavailable', 'Indisponível'), ('timeout', 'Tempo esgotado'), ('declined', 'Recusada'), ('invalid_response', 'Resposta inválida'), ('error', 'Erro'), ('circuit_open', 'Pulada (circuito aberto)')], max_length=20),
        ),
    ]

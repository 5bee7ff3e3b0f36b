# The staff refund's maker-checker action (accounts.approvals, payments.approvals):
# apart from 0010 so that merging another new action touches this file only.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0010_insider_credential_links_and_change_requests'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='moneyactionrequest',
            options={'ordering': ['-requested_at'], 'permissions': [('approve_chargeback_resolution', 'Pode aprovar a resolução de uma contestação a favor da conta'), ('approve_withdrawal_return', 'Pode aprovar marcar um saque como devolvido pelo destino'), ('approve_undetermined_payout_failure', 'Pode aprovar falhar um pagamento indeterminado (o débito é devolvido)'), ('approve_sent_payout_redebit', 'Pode aprovar debitar de novo um saque falho que a adquirente pagou'), ('approve_charge_refund', 'Pode aprovar o estorno de uma cobrança paga (o valor volta ao pagador)')], 'verbose_name': 'pedido de aprovação', 'verbose_name_plural': 'pedidos de aprovação'},
        ),
        migrations.AlterField(
            model_name='moneyactionrequest',
            name='action',
            field=models.CharField(choices=[('resolve_chargeback', 'Resolver contestação a favor da conta'), ('mark_withdrawal_returned', 'Marcar saque como devolvido pelo destino'), ('fail_undetermined_payout', 'Falhar pagamento indeterminado (devolver o saldo)'), ('redebit_sent_payout', 'Debitar de novo saque falho que a adquirente pagou'), ('refund_charge', 'Estornar cobrança paga (devolver ao pagador)')], max_length=40, verbose_name='ação'),
        ),
        migrations.AlterField(
            model_name='moneyactionrequest',
            name='amount',
            field=models.BigIntegerField(help_text='Em centavos: o que a ação credita, ou debita (redébito de um saque pago na adquirente, estorno).', verbose_name='valor'),
        ),
    ]

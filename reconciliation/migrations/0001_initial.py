"""The reconciliation models, moved from ``payments`` with their tables
(``payments_reconciliationrun``, ``payments_reconciliationitem``): state
only, no table is created or copied (``payments`` 0018 drops them from its
own state)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('accounts', '0014_security_review_fixes'),
        ('acquirers', '0005_conversion_measured_and_override'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ('payments', '0017_charge_refund_unclear_at'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ReconciliationRun',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('day', models.DateField(help_text='Dia (horário de Brasília) conciliado.', verbose_name='dia')),
                        ('window_start', models.DateTimeField(verbose_name='início da janela')),
                        ('window_end', models.DateTimeField(verbose_name='fim da janela')),
                        ('status', models.CharField(choices=[('running', 'Em andamento'), ('done', 'Concluída'), ('failed', 'Falhou'), ('skipped', 'Não suportada pela adquirente')], default='running', max_length=16, verbose_name='situação')),
                        ('started_at', models.DateTimeField(verbose_name='iniciada em')),
                        ('finished_at', models.DateTimeField(blank=True, null=True, verbose_name='terminada em')),
                        ('executions', models.PositiveIntegerField(default=0, help_text='Quantas vezes o dia foi conciliado.', verbose_name='execuções')),
                        ('matched_count', models.PositiveIntegerField(default=0, verbose_name='conferidos')),
                        ('matched_amount', models.BigIntegerField(default=0, help_text='Em centavos.', verbose_name='valor conferido')),
                        ('unmatched_count', models.PositiveIntegerField(default=0, verbose_name='divergentes')),
                        ('unmatched_amount', models.BigIntegerField(default=0, help_text='Em centavos.', verbose_name='valor divergente')),
                        ('healed_count', models.PositiveIntegerField(default=0, help_text='Pagos na adquirente e pendentes aqui: o evento confirmado foi aplicado.', verbose_name='corrigidos')),
                        ('error', models.CharField(blank=True, max_length=500, verbose_name='erro')),
                        ('acquirer', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='reconciliation_runs', to='acquirers.acquirer', verbose_name='adquirente')),
                    ],
                    options={
                        'verbose_name': 'conciliação com adquirente',
                        'verbose_name_plural': 'conciliações com adquirentes',
                        'db_table': 'payments_reconciliationrun',
                        'ordering': ['-day', 'acquirer_id'],
                    },
                ),
                migrations.CreateModel(
                    name='ReconciliationItem',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('paid_there_not_here', 'Paga na adquirente, pendente ou falha aqui'), ('paid_here_unknown_there', 'Paga aqui, desconhecida na adquirente'), ('amount_differs', 'Valores diferentes'), ('payout_sent_there_failed_here', 'Pix enviado na adquirente, saque falho aqui'), ('payout_failed_there_paid_here', 'Pix não realizado na adquirente, saque pago aqui'), ('refund_differs', 'Devolução em um lado só'), ('unknown_here', 'Registro da adquirente sem correspondente aqui'), ('duplicate_e2e', 'Registro repetido (e2e id ou id de envio já visto)'), ('partial_return', 'Pix creditado integralmente, devolvido em parte na adquirente'), ('refunded_there_chargeback_here', 'Devolvida na adquirente, contestada (MED) aqui'), ('record_failed', 'Registro que a conciliação não conseguiu conferir')], max_length=40, verbose_name='tipo')),
                        ('direction', models.CharField(choices=[('received', 'Recebido (cobrança)'), ('sent', 'Enviado (saque)')], max_length=16, verbose_name='sentido')),
                        ('key', models.CharField(help_text='O e2e id, ou nossa referência quando não há.', max_length=100, verbose_name='chave')),
                        ('reference', models.CharField(blank=True, help_text='txid ou id de idempotência.', max_length=64, verbose_name='referência')),
                        ('e2e_id', models.CharField(blank=True, max_length=64, verbose_name='e2e id')),
                        ('target_type', models.CharField(blank=True, max_length=40, verbose_name='tipo do registro')),
                        ('target_id', models.CharField(blank=True, max_length=64, verbose_name='registro')),
                        ('ours_status', models.CharField(blank=True, max_length=32, verbose_name='situação aqui')),
                        ('ours_amount', models.BigIntegerField(blank=True, help_text='Em centavos.', null=True, verbose_name='valor aqui')),
                        ('theirs_status', models.CharField(blank=True, max_length=32, verbose_name='situação na adquirente')),
                        ('theirs_amount', models.BigIntegerField(blank=True, help_text='Em centavos.', null=True, verbose_name='valor na adquirente')),
                        ('theirs_raw', models.JSONField(blank=True, default=dict, verbose_name='registro da adquirente')),
                        ('returned_by_med', models.BigIntegerField(blank=True, help_text='Em centavos, segundo a adquirente.', null=True, verbose_name='devolvido pelo MED')),
                        ('returned_by_refund', models.BigIntegerField(blank=True, help_text='Em centavos, segundo a adquirente.', null=True, verbose_name='devolvido por estorno')),
                        ('detail', models.CharField(blank=True, max_length=500, verbose_name='detalhe')),
                        ('status', models.CharField(choices=[('open', 'Aberto'), ('healed', 'Corrigido automaticamente'), ('awaiting_approval', 'Aguardando aprovação'), ('resolved', 'Resolvido')], default='open', max_length=20, verbose_name='situação')),
                        ('resolution', models.CharField(blank=True, choices=[('healed', 'Evento confirmado aplicado pela conciliação'), ('acknowledged', 'Ciente, sem movimentação de saldo'), ('money_action', 'Movimentação de saldo pedida (aprovação)')], max_length=20, verbose_name='resolução')),
                        ('reason', models.TextField(blank=True, verbose_name='motivo')),
                        ('resolved_at', models.DateTimeField(blank=True, null=True, verbose_name='resolvido em')),
                        ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='encontrado em')),
                        ('last_seen_at', models.DateTimeField(verbose_name='visto por último em')),
                        ('acquirer', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='reconciliation_items', to='acquirers.acquirer', verbose_name='adquirente')),
                        ('approval_request', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='accounts.moneyactionrequest', verbose_name='pedido de aprovação')),
                        ('resolved_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='resolvido por')),
                        ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='items', to='reconciliation.reconciliationrun', verbose_name='conciliação')),
                    ],
                    options={
                        'verbose_name': 'divergência de conciliação',
                        'verbose_name_plural': 'divergências de conciliação',
                        'db_table': 'payments_reconciliationitem',
                        'ordering': ['-created_at', '-id'],
                        'permissions': [('resolve_reconciliationitem', 'Pode resolver divergências de conciliação')],
                    },
                ),
                migrations.AddConstraint(
                    model_name='reconciliationrun',
                    constraint=models.UniqueConstraint(fields=('acquirer', 'day'), name='reconciliation_run_one_per_day'),
                ),
                migrations.AddConstraint(
                    model_name='reconciliationrun',
                    constraint=models.CheckConstraint(condition=models.Q(('matched_amount__gte', 0)), name='reconciliation_matched_non_negative'),
                ),
                migrations.AddConstraint(
                    model_name='reconciliationrun',
                    constraint=models.CheckConstraint(condition=models.Q(('unmatched_amount__gte', 0)), name='reconciliation_unmatched_non_negative'),
                ),
                migrations.AddIndex(
                    model_name='reconciliationitem',
                    index=models.Index(fields=['status', '-created_at'], name='reconciliation_item_status'),
                ),
                migrations.AddConstraint(
                    model_name='reconciliationitem',
                    constraint=models.UniqueConstraint(fields=('acquirer', 'kind', 'key'), name='reconciliation_item_unique'),
                ),
            ],
        ),
    ]

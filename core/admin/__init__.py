"""Admin building blocks the apps share, one module per concern: records
staff read rather than edit (``records``), confirming what staff do to money
(``confirmation``), status-changing actions (``transitions``), money lists
with totals and CSV (``lists``), reais in and out (``money``), secrets shown
once (``reveal``) and the sign-in's client address (``signin``). Nothing
here registers a model."""

"""Targets a run can execute: registered Python handlers and HTTP webhooks.

``registry`` maps handler names to functions (``@job("reports.nightly")``), ``context`` is what a
handler receives, ``webhook``/``ssrf`` call HTTP targets safely, ``executor`` runs either under a
timeout with a heartbeat.
"""

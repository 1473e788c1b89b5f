"""The HTTP API: a Powertools ``APIGatewayHttpResolver`` with routes split by resource.

``jobsched.api.app.build_app`` wires the routers to the services; ``functions/api.py`` builds it once
per Lambda container and resolves API Gateway HTTP API (payload v2) events with it.
"""

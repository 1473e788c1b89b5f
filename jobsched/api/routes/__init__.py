"""One module per resource, each with its routes at module level on a Powertools ``Router``
(``router``), the services they use injected with ``Depends`` (:mod:`jobsched.api.deps`).

These modules, and :mod:`jobsched.api.deps`, do without ``from __future__ import annotations``:
Powertools reads a route's and a provider's annotations on every request (``typing.get_type_hints``),
which for annotations kept as strings means evaluating each of them again.
"""

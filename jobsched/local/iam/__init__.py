"""Permissions proved by use (docs/decisions/0038-permissions-proved-by-use.md): record each function's
AWS calls (:mod:`.recorder`), map them to IAM requests (:mod:`.requests`), evaluate them against the
functions' roles in a synthesized template (:mod:`.template`, :mod:`.policy`, :mod:`.evaluation`) and
report the grants no call used (:mod:`.report`, :mod:`.dispositions`). Development only."""

"""The emulated account: one moto server in a child process on loopback, with the rehearsal's patches.

One process serves every service (CloudFormation creates the tables, queues and functions in its own
process's backends, so they cannot be split as the embedded mode splits DynamoDB off). The child runs
the embedded mode's fixes (:mod:`jobsched.local.moto_fixes`: what the functions need of the emulator
at run time) and the rehearsal's (:mod:`jobsched.rehearsal.emulator`: what ``cdk deploy`` needs).
"""

from __future__ import annotations

from jobsched.local.embedded import MotoProcess

#: The child's program: as the embedded mode's, plus the CloudFormation workarounds; it exits when
#: its stdin closes, so a rehearsal killed without cleaning up leaves no server behind.
REHEARSAL_CHILD = """
import logging, os, sys, threading
logging.getLogger("werkzeug").setLevel(logging.WARNING)
logging.getLogger("moto").setLevel(logging.ERROR)
import warnings
warnings.simplefilter("ignore")
def _orphaned():
    sys.stdin.buffer.read()
    os._exit(0)
threading.Thread(target=_orphaned, daemon=True).start()
from jobsched.local import moto_fixes
moto_fixes.apply()
from jobsched.rehearsal import emulator
emulator.apply()
_log = os.environ.get("JOBSCHED_REHEARSAL_SERVER_LOG")
if _log:  # from here on, the server's errors go to the rehearsal's log
    os.dup2(os.open(_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), 2)
from moto.server import main
main(sys.argv[1:])
"""


class EmulatedAccount(MotoProcess):
    """moto with the rehearsal's patches, on ``127.0.0.1`` (a free port unless one is given)."""

    CHILD_PROGRAM = REHEARSAL_CHILD
    #: The variable that names the file the server's errors are written to once it runs.
    LOG_VARIABLE = "JOBSCHED_REHEARSAL_SERVER_LOG"

    @property
    def localhost_url(self) -> str:
        """The same server named ``localhost``: moto reads a change set's TemplateURL path-style only
        when its host says so (gap ``template-url-host``)."""
        return f"http://localhost:{self.port}"

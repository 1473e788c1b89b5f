"""The embedded mode's code version (decision 0048): the git revision of the working directory, else
"dev"; each attempt records it."""

from __future__ import annotations

import subprocess

from jobsched.local.code_version import NO_GIT_CODE_VERSION, local_code_version


def test_the_code_version_is_the_git_revision_of_the_working_directory(tmp_path):
    # Given a git work tree with one commit
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    git("init", "-q")
    (tmp_path / "handlers.py").write_text("# handlers\n")
    git("add", "handlers.py")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "first")
    # Then the code version is its short revision
    assert local_code_version(str(tmp_path)) == git("rev-parse", "--short", "HEAD")


def test_outside_a_git_work_tree_the_code_version_is_dev(tmp_path):
    assert local_code_version(str(tmp_path)) == NO_GIT_CODE_VERSION == "dev"

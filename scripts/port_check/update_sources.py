"""Copies the pages and examples listed in sources.py from a jax git directory.

    python update_sources.py GITDIR [COMMIT]

GITDIR is a jax-ml/jax git directory (a clone's .git, or a bare mirror);
COMMIT defaults to sources.JAX_COMMIT.  Writes pages/NAME.md and
pages/examples/NAME.py; the README there names the commit.
"""
import os
import subprocess
import sys

import sources

HERE = os.path.dirname(os.path.abspath(__file__))


def show(gitdir, rev, path):
    return subprocess.run(["git", "--git-dir", gitdir, "show", f"{rev}:{path}"],
                          check=True, capture_output=True, text=True).stdout


def main():
    gitdir = sys.argv[1]
    commit = sys.argv[2] if len(sys.argv) > 2 else sources.JAX_COMMIT
    os.makedirs(os.path.join(HERE, "pages", "examples"), exist_ok=True)
    for name, path in sources.PAGES.items():
        with open(os.path.join(HERE, "pages", name + ".md"), "w") as f:
            f.write(show(gitdir, commit, path))
    for name, (path, rev, _skip) in sources.EXAMPLES.items():
        with open(os.path.join(HERE, "pages", "examples", name + ".py"), "w") as f:
            f.write(show(gitdir, rev or commit, path))


if __name__ == "__main__":
    main()
